package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/report"
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

// Two recordings of one configuration differ only by the machine's
// noise: the diff names nothing better or worse. A batch of 16 against
// one of 512 keeps its real effect: a thirtieth of the communication
// bytes per sample.
func TestDiffVerdictsAboveTheNoise(t *testing.T) {
	if testing.Short() {
		t.Skip("records three training runs")
	}
	dir := t.TempDir()
	// A batch of 512 has a thirtieth of the steps: three epochs give it
	// enough (57) to measure its own variation.
	rec := func(name, batch, epochs string) string {
		out := filepath.Join(dir, name)
		r := commprof(t, nil, "record", "--ranks", "2", "--out", out, "--", "train", "--epochs", epochs, "--batch-size", batch)
		if r.code != 0 {
			t.Fatalf("record %s: exit %d\n%s", name, r.code, r.stderr)
		}
		return out
	}
	a, b, big := rec("a", "16", "1"), rec("b", "16", "1"), rec("big", "512", "3")
	d := diffJSON(t, a, b)
	for _, c := range append(d.Outcomes, d.Changes...) {
		if c.Verdict == analyze.Better || c.Verdict == analyze.Worse {
			t.Errorf("same configuration: %s %s → %s (%+.1f%%, noise %.1f%% from %s) is %s",
				c.Metric, report.FormatValue(c.A, c.Unit), report.FormatValue(c.B, c.Unit), 100**c.Rel, 100*c.NoiseRel, c.NoiseFrom, c.Verdict)
		}
		if c.Rel != nil && c.NoiseFrom == "" {
			t.Errorf("%s has no noise", c.Metric)
		}
	}
	if r := commprof(t, nil, "diff", a, b); !strings.Contains(r.stdout, "95% interval") || strings.Contains(r.stdout, " better\n") ||
		strings.Contains(r.stdout, " worse\n") || !strings.Contains(r.stdout, "--all prints them") {
		t.Errorf("the terminal diff of one configuration:\n%s", r.stdout)
	}
	d = diffJSON(t, a, big)
	// Bytes per sample fall by the batch ratio: an effect whatever the
	// machine does. Exposed communication per sample falls too, but on 2
	// ranks a batch of 512's exposed time per step spreads so widely
	// between stretches of the run that it may be within noise: never
	// worse.
	want := map[string]bool{"communication bytes per sample": true, "exposed communication per sample": false}
	for _, c := range d.Outcomes {
		strict, ok := want[c.Metric]
		if !ok {
			continue
		}
		delete(want, c.Metric)
		switch {
		case strict && (c.Verdict != analyze.Better || c.CIHigh == nil || *c.CIHigh >= 0 || *c.Rel > -0.9),
			!strict && (c.Verdict == analyze.Worse || *c.Rel >= 0):
			t.Errorf("batch 16 → 512: %s %+.1f%% (interval %s) is %q", c.Metric, 100**c.Rel, report.FormatNoise(c), c.Verdict)
		}
	}
	if len(want) > 0 {
		t.Errorf("batch 16 → 512 lacks %v", want)
	}
}

// diffJSON is commprof diff's JSON of runs x and y.
func diffJSON(t *testing.T, x, y string) *analyze.Diff {
	t.Helper()
	r := commprof(t, nil, "diff", x, y, "--format", "json")
	var d analyze.Diff
	if err := json.Unmarshal([]byte(r.stdout), &d); r.code != 0 || err != nil {
		t.Fatalf("diff %s %s: exit %d %v\n%s", x, y, r.code, err, r.stderr)
	}
	return &d
}
