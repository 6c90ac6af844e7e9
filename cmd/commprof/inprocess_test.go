package main

import (
	"encoding/csv"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/trace"
)

// The runs under testdata/runs were recorded by this commprof (a 2-rank
// train of 2 epochs, a 2-rank allreduce benchmark) and are read here in
// process, without building or starting the binary.
const (
	trainRun = "../../testdata/runs/train"
	benchRun = "../../testdata/runs/bench"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// inProcess runs the command line in this process, as main would.
func inProcess(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ios, _, out, errOut := iostreams.Test()
	code = run(args, ios)
	return code, out.String(), errOut.String()
}

// rawEvents reads a run's events straight from its streams.
func rawEvents(t *testing.T, dir string) (n int, collectives map[string]int) {
	t.Helper()
	r, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	collectives = map[string]int{}
	for _, rk := range r.Ranks {
		n += len(rk.Events)
		for _, e := range rk.Events {
			if e.Kind == trace.KindCollective {
				collectives[e.Name]++
			}
		}
	}
	return n, collectives
}

// Every reading command, in process, against counts taken from the
// streams themselves.
func TestInProcessReadingCommands(t *testing.T) {
	events, colls := rawEvents(t, trainRun)

	code, out, errOut := inProcess(t, "stats", trainRun, "--format", "json")
	var s analyze.Summary
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil {
		t.Fatalf("stats --format json: exit %d\n%s", code, errOut)
	}
	if s.Run.Events != int64(events) || s.Run.WorldSize != 2 || len(s.Epochs) != 2 {
		t.Errorf("stats: %d events (streams: %d), world %d, %d epochs", s.Run.Events, events, s.Run.WorldSize, len(s.Epochs))
	}
	var calls int64
	for _, o := range s.Ops {
		if o.Op == "allreduce" {
			calls = o.Calls
		}
	}
	if calls == 0 || 2*calls != int64(colls["allreduce"]) {
		t.Errorf("stats: %d allreduce calls, the streams hold %d rank events of it (2 ranks)", calls, colls["allreduce"])
	}

	code, out, errOut = inProcess(t, "dump", trainRun, "--format", "csv")
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if code != 0 || err != nil || len(rows) != events+1 {
		t.Errorf("dump --format csv: exit %d, %v, %d rows for %d events\n%s", code, err, len(rows), events, errOut)
	}

	dir := t.TempDir()
	for _, args := range [][]string{
		{"export", trainRun, "--format", "csv", "-o", filepath.Join(dir, "t.csv")},
		{"export", trainRun, "--format", "perfetto", "-o", filepath.Join(dir, "t.json")},
		{"report", trainRun, "-o", filepath.Join(dir, "t.html")},
		{"report", benchRun, "-o", filepath.Join(dir, "b.html")},
		{"diff", trainRun, trainRun, "--html", filepath.Join(dir, "d.html")},
		{"stats", benchRun, "--by", "size"},
	} {
		if code, _, errOut := inProcess(t, args...); code != 0 {
			t.Errorf("%v: exit %d\n%s", args, code, errOut)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "t.csv"))
	if n := strings.Count(string(b), "\n"); err != nil || n != events+1 {
		t.Errorf("export csv: %d lines for %d events (%v)", n, events, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "b.html")); err != nil || !strings.Contains(string(b), "<title>bench-allreduce · commprof</title>") ||
		!strings.Contains(string(b), `<div class="cp-subtitle">bench allreduce · 2 ranks`) {
		t.Errorf("the bench report is not titled by the run's name, with its program beneath (%v)", err)
	}
	// A run diffed with itself: the same configuration, no change.
	code, out, _ = inProcess(t, "diff", trainRun, trainRun, "--format", "json")
	var d analyze.Diff
	if code != 0 || json.Unmarshal([]byte(out), &d) != nil || d.Title != "same configuration" || len(d.Config) != 0 {
		t.Errorf("diff of a run with itself: exit %d, title %q, config %v", code, d.Title, d.Config)
	}
	for _, c := range append(d.Outcomes, d.Changes...) {
		if c.Delta != 0 || c.Verdict != "" {
			t.Errorf("diff of a run with itself: %+v", c)
		}
	}
}

// predict with a model written by hand gives the ring's alpha-beta-gamma
// time, summed over the run's allreduces per step.
func TestInProcessPredictFromAModel(t *testing.T) {
	const alpha, beta, gamma = 1000.0, 1.0, 0.5
	model := filepath.Join(t.TempDir(), "model.json")
	m := analyze.ModelFile{Format: analyze.ModelFormat, Version: 1,
		Fit: analyze.Fit{AlphaNS: alpha, BetaNSPerB: beta, GammaNSPerB: gamma, Usable: true}}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(model, b, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := inProcess(t, "predict", trainRun, "--model", model, "--ranks", "8,64", "--algo", "ring", "--format", "json")
	var p analyze.Prediction
	if code != 0 || json.Unmarshal([]byte(out), &p) != nil || p.Projection == nil {
		t.Fatalf("predict: exit %d\n%s%s", code, out, errOut)
	}
	if len(p.Projection.Calls) == 0 {
		t.Fatal("no allreduce per step in the projection")
	}
	for j, ranks := range []float64{8, 64} {
		var want float64
		for _, c := range p.Projection.Calls {
			n := float64(c.Bytes)
			want += c.PerStep * (2*(ranks-1)*alpha + 2*(ranks-1)/ranks*n*beta + (ranks-1)/ranks*n*gamma)
		}
		if got := p.Projection.TimeNS[0][j]; math.Abs(got-want) > 1e-9*want {
			t.Errorf("ring on %v ranks: %v ns, the formula gives %v", ranks, got, want)
		}
	}
}

// The text of stats over the recorded run, kept as a golden file so that
// any change of a figure or its layout is seen in review (go test
// -run Golden -update rewrites it).
func TestInProcessStatsGolden(t *testing.T) {
	for name, args := range map[string][]string{
		"stats-train.txt": {"stats", trainRun},
		"stats-bench.txt": {"stats", benchRun},
	} {
		code, out, errOut := inProcess(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, errOut)
		}
		golden := filepath.Join("../../testdata/golden", name)
		if *update {
			if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatalf("%v (go test -run Golden -update writes it)", err)
		}
		if out != string(want) {
			t.Errorf("%v differs from %s:\n%s", args, golden, out)
		}
	}
}

// Usage errors, in process: exit 2, the error, and the subcommand's help
// named.
func TestInProcessUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		want, help string
	}{
		{[]string{"stats"}, "commprof stats takes 1 argument", "commprof stats --help"},
		{[]string{"stats", trainRun, "--by", "colour"}, "colour", "commprof stats --help"},
		{[]string{"diff", trainRun}, "takes 2 argument", "commprof diff --help"},
		{[]string{"report", trainRun, "--bogus"}, "unknown flag: --bogus", "commprof report --help"},
		{[]string{"sweep", "--out", t.TempDir(), "--", "bench"}, "-- train", "commprof sweep --help"},
		{[]string{"bench", "read"}, "takes 1 argument", "commprof bench read --help"},
	} {
		code, _, errOut := inProcess(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "Run '"+tc.help+"' for usage.") {
			t.Errorf("%v: exit %d, %q; want %d, %q and %q", tc.args, code, errOut, exitUsage, tc.want, tc.help)
		}
	}
	if code, _, errOut := inProcess(t, "stats", filepath.Join(t.TempDir(), "none")); code != exitError || !strings.Contains(errOut, "none") {
		t.Errorf("stats of a missing run: exit %d, %q", code, errOut)
	}
}
