package main

import (
	"strings"
	"testing"
)

// The terminal diff leads with the outcomes, then the per-step changes,
// then the once-per-epoch ones (the first broadcast, the evaluation's
// allreduces, the barrier) in a table of their own.
func TestDiffTablesInTheTerminal(t *testing.T) {
	code, out, errOut := inProcess(t, "diff", trainRun, trainRun, "--all", "--limit", "5")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	outcomes := strings.Index(out, "\nOutcomes\n")
	steps := strings.Index(out, "\nChanges from A to B (per step)")
	epochs := strings.Index(out, "\nPer epoch: ")
	if outcomes < 0 || steps < outcomes || epochs < steps {
		t.Fatalf("want the outcomes, the per-step changes, then the per-epoch ones:\n%s", out)
	}
	stepTable, epochTable := out[steps:epochs], out[epochs:]
	if rows := strings.Count(stepTable, "\nstep ") + strings.Count(stepTable, "\nop ") + strings.Count(stepTable, "\ncollective ") +
		strings.Count(stepTable, "\nresult ") + strings.Count(stepTable, "\nskew ") + strings.Count(stepTable, "\nfit "); rows != 5 {
		t.Errorf("%d per-step rows with --limit 5:\n%s", rows, stepTable)
	}
	if !strings.Contains(stepTable, "more: --limit 0 prints them") {
		t.Errorf("the per-step table does not say it was cut:\n%s", stepTable)
	}
	for _, want := range []string{"barrier calls per epoch", "broadcast tree 32KiB-64KiB calls per epoch", "allreduce recursive_doubling 8B-16B calls per epoch"} {
		if !strings.Contains(epochTable, want) {
			t.Errorf("the per-epoch table lacks %q:\n%s", want, epochTable)
		}
	}
	if strings.Contains(epochTable, "per step") || strings.Contains(epochTable, "effect") {
		t.Errorf("the per-epoch table holds per-step figures:\n%s", epochTable)
	}
	// --limit 0: every per-step change, none of them per epoch.
	_, out, _ = inProcess(t, "diff", trainRun, trainRun, "--all")
	steps, epochs = strings.Index(out, "\nChanges from A to B"), strings.Index(out, "\nPer epoch: ")
	if steps < 0 || epochs < steps || strings.Contains(out[steps:epochs], "barrier") || strings.Contains(out[steps:epochs], "8B-16B") ||
		strings.Contains(out, "--limit 0 prints") {
		t.Errorf("--limit 0:\n%s", out)
	}
}
