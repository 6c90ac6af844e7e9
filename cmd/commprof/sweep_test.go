package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/webtest"
	"github.com/commprof/commprof/trace"
)

// rawSweepFigures recomputes a run's figures from its events: the last
// test accuracy and learning rate marked, and the bytes of rank 0's
// collectives that start inside its steps, per sample of the global
// batch.
func rawSweepFigures(t *testing.T, dir string, globalBatch int) (acc, lr, bytesPerSample float64) {
	t.Helper()
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	var steps []trace.Event
	for _, e := range run.Ranks[0].Events {
		switch {
		case e.Kind == trace.KindMark && e.Name == "test_accuracy":
			acc = e.Value
		case e.Kind == trace.KindMark && e.Name == "lr":
			lr = e.Value
		case e.Kind == trace.KindStep:
			steps = append(steps, e)
		}
	}
	var bytes float64
	for _, e := range run.Ranks[0].Events {
		if e.Kind != trace.KindCollective {
			continue
		}
		for _, s := range steps {
			if e.Start >= s.Start && e.Start < s.End() {
				bytes += float64(e.Bytes)
			}
		}
	}
	return acc, lr, bytes / float64(len(steps)) / float64(globalBatch)
}

// TestSweep records a small sweep and checks its comparison against the
// runs' own events, then that running it again redoes nothing.
func TestSweep(t *testing.T) {
	dir := t.TempDir()
	args := []string{"sweep", "--out", dir, "--batch-sizes", "32,128", "--lr-scaling", "none,linear", "--ranks", "1,2",
		"--", "train", "--epochs", "2", "--synthetic-size", "2000", "--hidden", "64"}
	r := commprof(t, nil, args...)
	if r.code != 0 {
		t.Fatalf("sweep: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "sweep: 8 runs, 0 already recorded") || !strings.Contains(r.stderr, "[8/8]") {
		t.Errorf("sweep's progress:\n%s", r.stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sw analyze.Sweep
	if err := json.Unmarshal(b, &sw); err != nil {
		t.Fatal(err)
	}
	if len(sw.Configs) != 8 {
		t.Fatalf("%d configurations in sweep.json, want 8", len(sw.Configs))
	}
	sps := map[string]float64{}
	for _, c := range sw.Configs {
		name := fmt.Sprintf("%d ranks, batch %d, %s", c.Ranks, c.BatchSize, c.LRScaling)
		if len(c.Runs) != 1 || c.Failed != 0 || c.GlobalBatch != c.BatchSize*c.Ranks || len(c.EpochAccuracy) != 2 {
			t.Errorf("%s: runs %v, %d failed, global batch %d, %d epochs", name, c.Runs, c.Failed, c.GlobalBatch, len(c.EpochAccuracy))
			continue
		}
		acc, lr, bps := rawSweepFigures(t, c.Runs[0], c.GlobalBatch)
		if c.Accuracy.Mean != acc || c.EpochAccuracy[1] != acc {
			t.Errorf("%s: accuracy %v (epochs %v), the run marked %v", name, c.Accuracy.Mean, c.EpochAccuracy, acc)
		}
		// The learning rate scales from the sweep's smallest global
		// batch, 32.
		want := 0.05
		if c.LRScaling == "linear" {
			want *= float64(c.GlobalBatch) / 32
		}
		if math.Abs(lr-want) > 1e-9 {
			t.Errorf("%s: the run's learning rate was %v, want %v", name, lr, want)
		}
		if math.Abs(c.CommBytesPerSample.Mean-bps) > 1e-6*bps {
			t.Errorf("%s: %v communication bytes per sample, %v from the events", name, c.CommBytesPerSample.Mean, bps)
		}
		if c.Ranks == 1 && bps != 0 {
			t.Errorf("%s: a single rank sent %v bytes per sample", name, bps)
		}
		sps[name] = c.SamplesPerSec.Mean
		if c.Ranks == 2 {
			base := sps[fmt.Sprintf("1 ranks, batch %d, %s", c.BatchSize, c.LRScaling)]
			if want := c.SamplesPerSec.Mean / (2 * base); base == 0 || math.Abs(c.ScalingEfficiency-want) > 1e-9 {
				t.Errorf("%s: scaling efficiency %v, want %v (1 rank: %v samples/s)", name, c.ScalingEfficiency, want, base)
			}
		}
		if c.Reached > 0 && (c.TimeToTargetNS.Mean <= 0 || c.TimeToTargetNS.Mean > 2*c.EpochNS.Mean*1.01+1e6) {
			t.Errorf("%s: time to %.3f is %v ns, epochs take %v ns", name, sw.Target, c.TimeToTargetNS.Mean, c.EpochNS.Mean)
		}
	}
	// The terminal table has a row per configuration.
	rows := 0
	for _, line := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(line); len(f) > 5 && (f[1] == "none" || f[1] == "linear") {
			rows++
		}
	}
	if rows != 8 {
		t.Errorf("%d rows in the table, want 8:\n%s", rows, r.stdout)
	}

	checkSweepPage(t, filepath.Join(dir, "sweep.html"), &sw)

	// Again: nothing to do, nothing redone.
	first := sw.Configs[0].Runs[0]
	before, err := trace.ReadManifest(first)
	if err != nil {
		t.Fatal(err)
	}
	r = commprof(t, nil, args...)
	if r.code != 0 || !strings.Contains(r.stderr, "sweep: 8 runs, 8 already recorded") {
		t.Errorf("sweep again: exit %d\n%s", r.code, r.stderr)
	}
	if m, err := trace.ReadManifest(first); err != nil || m.RunID != before.RunID {
		t.Errorf("a finished run was recorded again (%v)", err)
	}
}

// TestSweepInterruptAndResume interrupts a sweep after its first run and
// runs it again: the finished run is kept, the rest are recorded.
func TestSweepInterruptAndResume(t *testing.T) {
	dir := t.TempDir()
	args := []string{"sweep", "--out", dir, "--batch-sizes", "16,32,64", "--ranks", "2",
		"--", "train", "--epochs", "3", "--synthetic-size", "4000", "--hidden", "64"}
	cmd, _, stderr := startCommprof(t, nil, args...)
	first := filepath.Join(dir, "r2-bs16-lrnone-wu0")
	deadline := time.Now().Add(60 * time.Second)
	for {
		if m, err := trace.ReadManifest(first); err == nil && m.Status == trace.StatusComplete {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first run did not finish in 60s\n%s", stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	before, err := trace.ReadManifest(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if code, _ := waitExit(t, cmd, 30*time.Second); code != exitInterrupted {
		t.Fatalf("exit %d after SIGINT, want %d\n%s", code, exitInterrupted, stderr)
	}
	if !strings.Contains(stderr.String(), "run the same command again") {
		t.Errorf("the interrupted sweep does not say how to finish it:\n%s", stderr)
	}
	r := commprof(t, nil, args...)
	if r.code != 0 {
		t.Fatalf("resumed sweep: exit %d\n%s", r.code, r.stderr)
	}
	var done int
	if _, err := fmt.Sscanf(r.stderr[strings.Index(r.stderr, "3 runs, "):], "3 runs, %d already recorded", &done); err != nil || done < 1 || done > 2 {
		t.Errorf("resumed sweep, %d already recorded (%v), want 1 or 2:\n%s", done, err, r.stderr)
	}
	if m, err := trace.ReadManifest(first); err != nil || m.RunID != before.RunID || m.Status != trace.StatusComplete {
		t.Errorf("the run finished before the interrupt was recorded again (%v)", err)
	}
	for _, bs := range []string{"16", "32", "64"} {
		if m, err := trace.ReadManifest(filepath.Join(dir, "r2-bs"+bs+"-lrnone-wu0")); err != nil || m.Status != trace.StatusComplete {
			t.Errorf("batch %s after the resumed sweep: %v %v", bs, m, err)
		}
	}
}

func TestSweepBadInvocations(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "--", "train"}, "--out DIR is required"},
		{[]string{"sweep", "--out", dir}, "-- train"},
		{[]string{"sweep", "--out", dir, "--", "bench"}, "-- train"},
		{[]string{"sweep", "--out", dir, "--batch-sizes", "64,x", "--", "train"}, "--batch-sizes"},
		{[]string{"sweep", "--out", dir, "--batch-sizes", "0", "--", "train"}, "--batch-sizes"},
		{[]string{"sweep", "--out", dir, "--lr-scaling", "cubic", "--", "train"}, "--lr-scaling"},
		{[]string{"sweep", "--out", dir, "--warmup-epochs", "-1", "--", "train"}, "--warmup-epochs"},
		{[]string{"sweep", "--out", dir, "--repeat", "0", "--", "train"}, "--repeat"},
		{[]string{"sweep", "--out", dir, "--", "train", "--batch-size", "8"}, "--batch-size"},
		{[]string{"sweep", "--out", dir, "--", "train", "--ranks=2"}, "--ranks"},
		{[]string{"sweep", "--out", dir, "--model", filepath.Join(dir, "none.json"), "--", "train"}, "none.json"},
		{[]string{"sweep", "--out", dir, "--lr-scaling", "linear", "--", "python3", "train.py"}, "--lr-scaling"},
		{[]string{"sweep", "--out", dir, "--", "python3", "train.py", "--batch-size=8"}, "--batch-size"},
	} {
		r := commprof(t, nil, c.args...)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want it to name %q", c.args, r.code, r.stderr, c.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("bad invocations left %d entries in the sweep directory", len(entries))
	}
}

// checkSweepPage opens a sweep's page in Chromium at 1280 px: it draws,
// nothing is clipped, and its table holds the sweep's own figures.
func checkSweepPage(t *testing.T, page string, sw *analyze.Sweep) {
	t.Helper()
	shot := filepath.Join(webtest.ScreenshotDir(t), "sweep.png")
	res := webtest.CheckPage(t, page, webtest.Options{Screenshot: shot, FullPage: true, HoverEvent: -1, WaitFor: drawn, Viewport: "1280x800",
		Eval: `({rows: [...document.querySelectorAll('#configurations tbody tr')].map(r => [r.cells[0].textContent, r.cells[3].textContent, r.cells[1].textContent, r.cells[5].getAttribute('data-v')]),
			cards: document.querySelectorAll('.cp-card').length,
			links: [...document.querySelectorAll('#configurations tbody a')].map(a => a.getAttribute('href')),
			clipped: ` + webtest.ClippedJS + `})`})
	t.Logf("screenshot %s", shot)
	if p := res.Problems(); len(p) > 0 {
		t.Fatalf("the sweep page has problems: %q", p)
	}
	var got struct {
		Rows    [][4]string
		Cards   int
		Links   []string
		Clipped []string
	}
	if err := json.Unmarshal(res.Eval, &got); err != nil || res.Charts.Total < 5 || res.Charts.Drawn != res.Charts.Total || got.Cards < 3 {
		t.Fatalf("sweep page: %s (%v), charts %+v", res.Eval, err, res.Charts)
	}
	if len(got.Rows) != len(sw.Configs) {
		t.Fatalf("%d rows on the page, %d configurations", len(got.Rows), len(sw.Configs))
	}
	for i, c := range sw.Configs {
		acc, err := strconv.ParseFloat(got.Rows[i][3], 64)
		if got.Rows[i][0] != strconv.Itoa(c.Ranks) || got.Rows[i][1] != strconv.Itoa(c.BatchSize) || got.Rows[i][2] != c.LRScaling || err != nil || acc != c.Accuracy.Mean {
			t.Errorf("row %d: %q, configuration %d ranks batch %d %s accuracy %v", i, got.Rows[i], c.Ranks, c.BatchSize, c.LRScaling, c.Accuracy.Mean)
		}
	}
	if len(got.Clipped) > 0 {
		t.Errorf("at 1280 px the sweep page draws outside its boxes: %q", got.Clipped)
	}
	// Each run's link opens its report, a file beside the page: opened
	// from disk, not a directory listing.
	runs := 0
	for _, c := range sw.Configs {
		runs += len(c.Runs)
	}
	if len(got.Links) != runs {
		t.Errorf("%d links to runs on the page, %d runs", len(got.Links), runs)
	}
	for _, l := range got.Links {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(page), filepath.FromSlash(l)))
		if err != nil || !strings.HasSuffix(l, "/report.html") || !strings.Contains(string(b), `id="chart-`) {
			t.Errorf("the link %q does not open a run's report: %v", l, err)
		}
	}
}

// TestSweepResumeChecksFlags: a finished run recorded with other train
// flags is not kept as if it were this sweep's. The sweep refuses, naming
// the flag, and --force records the run again.
func TestSweepResumeChecksFlags(t *testing.T) {
	dir := t.TempDir()
	sweep := func(extra []string, train ...string) result {
		args := append([]string{"sweep", "--out", dir, "--ranks", "1"}, extra...)
		args = append(append(args, "--", "train", "--synthetic-size", "600", "--hidden", "16"), train...)
		return commprof(t, nil, args...)
	}
	if r := sweep([]string{"--batch-sizes", "32"}, "--epochs", "1"); r.code != 0 {
		t.Fatalf("first sweep: exit %d\n%s", r.code, r.stderr)
	}
	run := filepath.Join(dir, "r1-bs32-lrnone-wu0")
	first, err := trace.ReadManifest(run)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		extra, train []string
		want         []string
	}{
		{[]string{"--batch-sizes", "32"}, []string{"--epochs", "2"},
			[]string{"r1-bs32-lrnone-wu0 was recorded with --epochs 1, this sweep records it with --epochs 2", "--force"}},
		{[]string{"--batch-sizes", "32"}, []string{"--epochs", "1", "--lr", "0.1"},
			[]string{"without --lr, this sweep records it with --lr 0.1"}},
		// A smaller batch lowers the base of the learning-rate rules.
		{[]string{"--batch-sizes", "16,32"}, []string{"--epochs", "1"},
			[]string{"with --lr-base-batch 32, this sweep records it with --lr-base-batch 16", "smallest global batch"}},
	} {
		r := sweep(c.extra, c.train...)
		if r.code != exitError {
			t.Errorf("%v %v: exit %d, want %d\n%s", c.extra, c.train, r.code, exitError, r.stderr)
		}
		for _, w := range c.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%v %v: stderr lacks %q:\n%s", c.extra, c.train, w, r.stderr)
			}
		}
		if m, err := trace.ReadManifest(run); err != nil || m.RunID != first.RunID {
			t.Fatalf("a refused sweep recorded the run again (%v)", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "r1-bs16-lrnone-wu0")); err == nil {
			t.Fatal("a refused sweep recorded a run")
		}
	}
	r := sweep([]string{"--batch-sizes", "32", "--force"}, "--epochs", "2")
	if r.code != 0 || !strings.Contains(r.stderr, "recording again: r1-bs32-lrnone-wu0") || !strings.Contains(r.stderr, "1 runs, 0 already recorded") {
		t.Fatalf("--force: exit %d\n%s", r.code, r.stderr)
	}
	m, err := trace.ReadManifest(run)
	if err != nil || m.RunID == first.RunID || !slices.Contains(m.Command, "--epochs") || m.Command[len(m.Command)-1] != "2" {
		t.Fatalf("--force did not record the run again with --epochs 2: %v %v", m.Command, err)
	}
	var sw analyze.Sweep
	b, err := os.ReadFile(filepath.Join(dir, "sweep.json"))
	if err != nil || json.Unmarshal(b, &sw) != nil || len(sw.Configs) != 1 || len(sw.Configs[0].EpochAccuracy) != 2 {
		t.Fatalf("sweep.json after --force: %v %s", err, b)
	}
	// Now the same flags again: kept.
	if r := sweep([]string{"--batch-sizes", "32"}, "--epochs", "2"); r.code != 0 || !strings.Contains(r.stderr, "1 runs, 1 already recorded") {
		t.Errorf("the same flags again: exit %d\n%s", r.code, r.stderr)
	}
}

// TestSweepRepeatsAndModel records each configuration twice, with
// warm-ups (none of which apply to "none") and a model: the figures span
// the repeats' own, and the projection is the model's ring formula over
// the run's allreduces.
func TestSweepRepeatsAndModel(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.json")
	const alpha, beta, gamma = 1000.0, 0.1, 0.01
	if err := os.WriteFile(model, []byte(fmt.Sprintf(`{"format":"commprof-model","version":1,"fit":{"usable":true,"alpha_ns":%v,"beta_ns_per_byte":%v,"gamma_ns_per_byte":%v}}`,
		alpha, beta, gamma)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "sweep")
	r := commprof(t, nil, "sweep", "--out", out, "--batch-sizes", "32", "--lr-scaling", "none,linear", "--warmup-epochs", "0,1",
		"--ranks", "2", "--repeat", "2", "--model", model, "--project", "64", "--", "train", "--epochs", "2", "--synthetic-size", "800", "--hidden", "16")
	if r.code != 0 {
		t.Fatalf("sweep: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "sweep: 6 runs") {
		t.Errorf("want 6 runs (none once, linear with and without warm-up, twice each):\n%s", r.stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "r2-bs32-lrnone-wu1")); err == nil {
		t.Error("none with a warm-up was recorded: it is the same run as without")
	}
	var sw analyze.Sweep
	b, err := os.ReadFile(filepath.Join(out, "sweep.json"))
	if err != nil || json.Unmarshal(b, &sw) != nil {
		t.Fatalf("sweep.json: %v", err)
	}
	if len(sw.Configs) != 3 || sw.ProjectRanks != 64 || sw.Model != model {
		t.Fatalf("%d configurations, projected to %d with %q", len(sw.Configs), sw.ProjectRanks, sw.Model)
	}
	p := 64.0
	ring := func(n float64) float64 { return 2*(p-1)*alpha + 2*(p-1)/p*n*beta + (p-1)/p*n*gamma }
	for _, c := range sw.Configs {
		name := c.LRScaling + " warm-up " + c.Warmup
		if len(c.Runs) != 2 || c.Runs[1] != c.Runs[0]+"-rep2" || c.Failed != 0 {
			t.Errorf("%s: runs %v, %d failed", name, c.Runs, c.Failed)
			continue
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, d := range c.Runs {
			acc, _, _ := rawSweepFigures(t, d, c.GlobalBatch)
			lo, hi = min(lo, acc), max(hi, acc)
		}
		if c.Accuracy.N != 2 || c.Accuracy.Min != lo || c.Accuracy.Max != hi || math.Abs(c.Accuracy.Mean-(lo+hi)/2) > 1e-12 {
			t.Errorf("%s: accuracy %+v, the repeats marked %v and %v", name, c.Accuracy, lo, hi)
		}
		if c.SamplesPerSec.N != 2 || c.SamplesPerSec.Min > c.SamplesPerSec.Mean || c.SamplesPerSec.Mean > c.SamplesPerSec.Max {
			t.Errorf("%s: samples/s %+v", name, c.SamplesPerSec)
		}
		if c.Reached > 2 || (c.Reached > 0) != (c.TimeToTargetNS.N > 0) || c.TimeToTargetNS.N != c.Reached {
			t.Errorf("%s: reached in %d repeats, time to target over %d", name, c.Reached, c.TimeToTargetNS.N)
		}
		// The model's projection of the first repeat's world allreduces
		// made at least every other step.
		run, err := trace.ReadRun(c.Runs[0])
		if err != nil {
			t.Fatal(err)
		}
		steps := map[int32]bool{}
		calls := map[int64]float64{}
		for _, e := range run.Ranks[0].Events {
			switch {
			case e.Kind == trace.KindStep:
				steps[e.Step] = true
			case e.Kind == trace.KindCollective && e.Name == "allreduce" && e.Comm == "world":
				calls[e.Bytes]++
			}
		}
		want := 0.0
		for n, k := range calls {
			if per := k / float64(len(steps)); per >= 0.5 {
				want += per * ring(float64(n))
			}
		}
		if want == 0 || math.Abs(c.ProjectedStepNS-want) > 1e-6*want {
			t.Errorf("%s: projected allreduce time per step at 64 ranks %v ns, the formula gives %v", name, c.ProjectedStepNS, want)
		}
	}
	// The terminal table is report's: the projection's column, the
	// repeats' min–max and both runs of a configuration.
	for _, want := range []string{"allreduce@64", "r2-bs32-lrlinear-wu1, r2-bs32-lrlinear-wu1-rep2", "per epoch", "–"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the table lacks %q:\n%s", want, r.stdout)
		}
	}
}
