package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
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
			clipped: ` + webtest.ClippedJS + `})`})
	t.Logf("screenshot %s", shot)
	if p := res.Problems(); len(p) > 0 {
		t.Fatalf("the sweep page has problems: %q", p)
	}
	var got struct {
		Rows    [][4]string
		Cards   int
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
}
