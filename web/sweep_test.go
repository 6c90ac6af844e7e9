package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/report"
	"github.com/commprof/commprof/trace"
)

// trainRun is a training run of the fixture: its configuration and the
// test accuracy of its two epochs.
type trainRun struct {
	dir        string
	ranks      int
	batch      int
	rule, warm string
	acc        [2]float64
	started    time.Time
}

// write records it: 20 steps of stepEvents on every rank, and after
// steps 10 and 20 the epoch marks the trainer records (rank 0).
func (tr trainRun) write(t *testing.T) {
	t.Helper()
	m := trace.Manifest{Name: "train", Start: tr.started, Config: map[string]string{"program": "train", "batch_size": fmt.Sprint(tr.batch),
		"lr_scaling": tr.rule, "warmup_epochs": tr.warm, "lr": "0.05"}, Metrics: trace.Metrics{"test_accuracy": tr.acc[1]}}
	rec := startRun(t, tr.dir, tr.ranks, m, 0)
	for e := range 2 {
		rec.add(10)
		end := int64(rec.steps) * 2_000_000
		marks := []trace.Event{
			{Rank: 0, Kind: trace.KindMark, Name: "test_accuracy", Start: end, Value: tr.acc[e], Peer: -1, Seq: -1, Step: rec.steps - 1, Root: -1, Chunk: -1},
			{Rank: 0, Kind: trace.KindMark, Name: "epoch", Start: end, Value: float64(e + 1), Peer: -1, Seq: -1, Step: rec.steps - 1, Root: -1, Chunk: -1},
		}
		if err := rec.ws[0].Write(marks); err != nil {
			t.Fatal(err)
		}
	}
	rec.finish(trace.StatusComplete)
}

func (tr trainRun) name() string {
	return fmt.Sprintf("r%d-bs%d-lr%s-wu%s", tr.ranks, tr.batch, tr.rule, tr.warm)
}

// writeSweep records runs under dir as `commprof sweep` does and writes
// its sweep.json, from the runs' summaries as the command makes it.
func writeSweep(t *testing.T, dir string, runs []trainRun) *analyze.Sweep {
	t.Helper()
	var srs []analyze.SweepRun
	for _, tr := range runs {
		tr.dir = filepath.Join(dir, tr.name())
		tr.write(t)
		sum, err := load.Summary(context.Background(), tr.dir)
		must(t, err)
		srs = append(srs, analyze.SweepRun{Dir: tr.dir, Summary: sum})
	}
	sw := analyze.NewSweep(srs, 0.8, nil, 0)
	b, err := json.MarshalIndent(sw, "", " ")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, rundir.SweepFile), b, 0o644))
	return sw
}

// sweepFixture is a runs directory with a sweep and what can go wrong
// with one:
//
//	runs/solo          a training run
//	runs/bs            a sweep of 3 configurations (batch 64 and 256, lr none and linear with warm-up)
//	runs/bs-broken     a sweep whose sweep.json is cut short
//	runs/bs-recording  a sweep whose second run is being recorded: no sweep.json yet
func sweepFixture(t *testing.T) (runs string, sw *analyze.Sweep) {
	t.Helper()
	runs = filepath.Join(t.TempDir(), "runs")
	now := time.Now()
	trainRun{dir: filepath.Join(runs, "solo"), ranks: 4, batch: 128, rule: "sqrt", warm: "0", acc: [2]float64{0.7, 0.85}, started: now.Add(-time.Hour)}.write(t)
	sw = writeSweep(t, filepath.Join(runs, "bs"), []trainRun{
		{ranks: 2, batch: 64, rule: "none", warm: "0", acc: [2]float64{0.8, 0.9}, started: now.Add(-3 * time.Hour)},
		{ranks: 2, batch: 256, rule: "none", warm: "0", acc: [2]float64{0.5, 0.6}, started: now.Add(-170 * time.Minute)},
		{ranks: 2, batch: 256, rule: "linear", warm: "1", acc: [2]float64{0.7, 0.8}, started: now.Add(-160 * time.Minute)},
	})
	writeSweep(t, filepath.Join(runs, "bs-broken"), []trainRun{
		{ranks: 2, batch: 64, rule: "none", warm: "0", acc: [2]float64{0.8, 0.9}, started: now.Add(-5 * time.Hour)},
		{ranks: 2, batch: 512, rule: "none", warm: "0", acc: [2]float64{0.3, 0.4}, started: now.Add(-5 * time.Hour)},
	})
	f := filepath.Join(runs, "bs-broken", rundir.SweepFile)
	b, err := os.ReadFile(f)
	must(t, err)
	must(t, os.WriteFile(f, b[:len(b)/2], 0o644))
	rec := trainRun{dir: filepath.Join(runs, "bs-recording", "r2-bs64-lrnone-wu0"), ranks: 2, batch: 64, rule: "none", warm: "0", acc: [2]float64{0.8, 0.9}, started: now.Add(-2 * time.Minute)}
	rec.write(t)
	startRun(t, filepath.Join(runs, "bs-recording", "r2-bs128-lrnone-wu0"), 2, trace.Manifest{Name: "train", Start: now.Add(-time.Minute),
		Config: map[string]string{"batch_size": "128", "lr_scaling": "none"}}, 3)
	return runs, sw
}

func apiRuns(t *testing.T, s http.Handler) map[string]report.RunEntry {
	t.Helper()
	var list struct{ Runs []report.RunEntry }
	res := get(t, s, "/api/runs")
	must(t, json.Unmarshal([]byte(body(t, res)), &list))
	out := map[string]report.RunEntry{}
	for _, r := range list.Runs {
		out[r.Name] = r
		for _, c := range r.Runs {
			out[c.Name] = c
		}
	}
	return out
}

// The list shows each sweep as one entry with its configurations and its
// runs; every figure of a run is its summary's, as `commprof stats
// --format json` prints it.
func TestServeListsSweeps(t *testing.T) {
	runs, sw := sweepFixture(t)
	s := newTestServer(t, Config{RunsDir: runs})
	list := apiRuns(t, s)

	bs := list["bs"]
	if bs.Kind != report.KindSweep || bs.Configs != 3 || len(bs.Runs) != 3 || bs.Status != trace.StatusComplete || bs.Error != "" ||
		bs.Report != "runs/bs/" || bs.Stats != "runs/bs/sweep.json" || bs.Range == nil {
		t.Fatalf("bs: %+v", bs)
	}
	if rg := bs.Range; rg.BatchSize != [2]int{64, 256} || rg.GlobalBatch != [2]int{128, 512} || rg.Ranks != [2]int{2, 2} ||
		strings.Join(rg.LRRules, "|") != "none|linear, warm-up 1" || rg.Accuracy == nil || *rg.Accuracy != [2]float64{0.6, 0.9} {
		t.Errorf("bs's range: %+v (accuracy %v)", rg, rg.Accuracy)
	}
	if sw.Configs[0].Accuracy.Mean != 0.9 {
		t.Errorf("the fixture's sweep: %+v", sw.Configs[0])
	}
	for _, c := range bs.Runs {
		if c.Kind != report.KindRun || c.Sweep != "bs" || !strings.HasPrefix(c.Name, "bs/") || c.Report != "runs/"+c.Name+"/" {
			t.Errorf("bs's run %+v", c)
		}
	}
	// Each run's columns against its summary.
	for _, name := range []string{"solo", "bs/r2-bs64-lrnone-wu0", "bs/r2-bs256-lrlinear-wu1"} {
		ri := list[name]
		sum, err := load.Summary(context.Background(), filepath.Join(runs, name))
		must(t, err)
		want := sum.Run.Config
		if fmt.Sprint(ri.BatchSize) != want["batch_size"] || ri.GlobalBatch != sum.Run.SamplesPerStep || ri.WorldSize != sum.Run.WorldSize ||
			ri.LRScaling != want["lr_scaling"] || ri.SamplesPerSec != sum.StepSummary.SamplesPerSec || ri.SamplesPerSec == 0 ||
			ri.Accuracy == nil || *ri.Accuracy != sum.Run.Metrics["test_accuracy"] || ri.Events != sum.Run.Events {
			t.Errorf("%s: %+v\nsummary: config %v, samples/step %d, samples/s %v, metrics %v", name, ri, want, sum.Run.SamplesPerStep, sum.StepSummary.SamplesPerSec, sum.Run.Metrics)
		}
		if w := want["warmup_epochs"]; (w == "0") != (ri.WarmupEpochs == "") {
			t.Errorf("%s: warm-up %q, config %q", name, ri.WarmupEpochs, w)
		}
	}

	broken := list["bs-broken"]
	if broken.Kind != report.KindSweep || len(broken.Runs) != 2 || !strings.Contains(broken.Error, "sweep.json is damaged") ||
		!strings.Contains(broken.Error, "commprof sweep --out") || broken.Stats != "" {
		t.Errorf("bs-broken: %+v", broken)
	}
	recording := list["bs-recording"]
	if recording.Status != trace.StatusRunning || len(recording.Runs) != 2 || !strings.Contains(recording.Error, "being recorded") {
		t.Errorf("bs-recording: %+v", recording)
	}

	page := body(t, get(t, s, "/"))
	for _, want := range []string{`data-run="bs" data-kind="sweep"`, `<span class="cp-configs">3 configurations</span>`, `data-run="bs/r2-bs64-lrnone-wu0"`,
		`<optgroup label="sweep bs">`, `<option value="bs/r2-bs256-lrlinear-wu1">r2-bs256-lrlinear-wu1</option>`, "linear, warm-up 1", "sweep.json is damaged"} {
		if !strings.Contains(page, want) {
			t.Errorf("the list lacks %s", want)
		}
	}
}

// A sweep's page is its sweep.json drawn; its runs are served under it.
func TestServeSweepPages(t *testing.T) {
	runs, sw := sweepFixture(t)
	s := newTestServer(t, Config{RunsDir: runs})
	res := get(t, s, "/runs/bs/")
	if page := body(t, res); res.StatusCode != 200 || !strings.Contains(page, `data-kind="sweep"`) || !strings.Contains(page, "global batch 128") {
		t.Fatalf("sweep page: %d", res.StatusCode)
	}
	if res := get(t, s, "/runs/bs"); res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/runs/bs/" {
		t.Errorf("/runs/bs: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	var back analyze.Sweep
	res = get(t, s, "/runs/bs/sweep.json")
	must(t, json.Unmarshal([]byte(body(t, res)), &back))
	if res.StatusCode != 200 || len(back.Configs) != len(sw.Configs) || back.Configs[1].BatchSize != sw.Configs[1].BatchSize {
		t.Errorf("sweep.json: %d, %+v", res.StatusCode, back)
	}
	run := "/runs/bs/r2-bs64-lrnone-wu0/"
	if page := body(t, get(t, s, run)); !strings.Contains(page, `id="summary-data"`) {
		t.Error("a sweep's run has no report")
	}
	if res := get(t, s, run+"stats.json"); res.StatusCode != 200 {
		t.Errorf("its stats.json: %d", res.StatusCode)
	}
	if res := get(t, s, run+"timeline.json?from=0&to=1000000"); res.StatusCode != 200 {
		t.Errorf("its timeline.json: %d", res.StatusCode)
	}
	if res := get(t, s, "/runs/bs/r2-bs64-lrnone-wu0"); res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/runs/bs/r2-bs64-lrnone-wu0/" {
		t.Errorf("without its slash: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	// A link written for the files on disk (NAME/report.html) works.
	if res := get(t, s, run+"report.html"); res.StatusCode != http.StatusFound || res.Header.Get("Location") != "/runs/bs/r2-bs64-lrnone-wu0/" {
		t.Errorf("report.html: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	// Any two runs compare, in a sweep or not.
	res = get(t, s, "/diff?a=bs/r2-bs64-lrnone-wu0&b=solo")
	if page := body(t, res); res.StatusCode != 200 || !strings.Contains(page, `data-kind="diff"`) {
		t.Errorf("diff of a sweep's run with another: %d", res.StatusCode)
	}

	// A damaged sweep.json: what is wrong, what to run, and its runs.
	res = get(t, s, "/runs/bs-broken/")
	page := body(t, res)
	for _, want := range []string{"The sweep bs-broken cannot be shown", "sweep.json is damaged", "commprof sweep --out",
		`href="../../runs/bs-broken/r2-bs64-lrnone-wu0/"`, `href="../../runs/bs-broken/r2-bs512-lrnone-wu0/"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the damaged sweep's page lacks %s:\n%s", want, page)
		}
	}
	if res.StatusCode != http.StatusInternalServerError {
		t.Errorf("damaged sweep: %d", res.StatusCode)
	}
	if res := get(t, s, "/runs/bs-broken/r2-bs512-lrnone-wu0/"); res.StatusCode != 200 {
		t.Errorf("a run of the damaged sweep: %d", res.StatusCode)
	}
	if res := get(t, s, "/runs/bs-broken/sweep.json"); res.StatusCode != http.StatusInternalServerError || !strings.Contains(body(t, res), "damaged") {
		t.Errorf("its sweep.json: %d", res.StatusCode)
	}
	// Still recording: no sweep.json yet, says so; the run being
	// recorded has its live page.
	res = get(t, s, "/runs/bs-recording/")
	if page := body(t, res); res.StatusCode != http.StatusNotFound || !strings.Contains(page, "being recorded") || !strings.Contains(page, "r2-bs128-lrnone-wu0") {
		t.Errorf("a sweep being recorded: %d\n%s", res.StatusCode, page)
	}
	if page := body(t, get(t, s, "/runs/bs-recording/r2-bs128-lrnone-wu0/")); !strings.Contains(page, `data-kind="live"`) || !strings.Contains(page, `href="../../../"`) {
		t.Errorf("the live page of a sweep's run:\n%s", page)
	}
}

// Sweeps' runs are confined as runs are: nothing deeper than one sweep,
// nothing hidden, nothing that links outside, nothing that is not a
// regular file, and nothing blocks.
func TestServeSweepConfinement(t *testing.T) {
	runs, _ := sweepFixture(t)
	outside := filepath.Join(filepath.Dir(runs), "outside")
	writeRun(t, filepath.Join(outside, "secret"), 2, trace.Manifest{Name: secret}, 2)
	must(t, os.WriteFile(filepath.Join(outside, "sweep.json"), []byte(`{"configs":[{"batch_size":1,"runs":["`+secret+`"]}]}`), 0o644))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(runs, "bs", "link")))
	writeRun(t, filepath.Join(runs, "bs", "r2-bs64-lrnone-wu0", "deeper"), 2, trace.Manifest{Name: secret}, 2)
	writeRun(t, filepath.Join(runs, "bs", ".hidden"), 2, trace.Manifest{Name: secret}, 2)
	writeRun(t, filepath.Join(runs, "solo", "inner"), 2, trace.Manifest{Name: secret}, 2)
	// A sweep whose sweep.json links outside, and one whose sweep.json
	// is a FIFO: reading it would block forever.
	writeRun(t, filepath.Join(runs, "linked", "r1"), 1, trace.Manifest{Name: "r1"}, 2)
	must(t, os.Symlink(filepath.Join(outside, "sweep.json"), filepath.Join(runs, "linked", rundir.SweepFile)))
	writeRun(t, filepath.Join(runs, "fifo", "r1"), 1, trace.Manifest{Name: "r1"}, 2)
	must(t, syscall.Mkfifo(filepath.Join(runs, "fifo", rundir.SweepFile), 0o644))

	s := newTestServer(t, Config{RunsDir: runs})
	for _, target := range []string{
		"/runs/bs/link/", "/runs/bs/link/stats.json", "/runs/bs/.hidden/", "/runs/bs/..%2fsolo/", "/runs/bs/r2-bs64-lrnone-wu0/deeper/",
		"/runs/solo/inner/", "/runs/solo/inner/stats.json", "/runs/bs/nosuch/", "/runs/nosuch/r1/", "/runs/bs/%2e%2e/",
		"/diff?a=bs/link&b=solo", "/diff?a=solo&b=bs/../solo", "/diff?a=solo&b=bs/r2-bs64-lrnone-wu0/deeper", "/diff?a=/solo&b=solo",
		"/runs/solo/sweep.json", "/runs/nosuch/sweep.json",
	} {
		res := get(t, s, target)
		if page := body(t, res); res.StatusCode != http.StatusNotFound || strings.Contains(page, secret) {
			t.Errorf("GET %s: %d", target, res.StatusCode)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		list := apiRuns(t, s)
		for name, ri := range list {
			if name == "bs/link" || strings.Contains(name, "hidden") || strings.Contains(name, "deeper") || strings.Contains(name, "inner") {
				t.Errorf("listed %s", name)
			}
			if strings.Contains(ri.Error, secret) {
				t.Errorf("%s shows what is outside: %s", name, ri.Error)
			}
		}
		if e := list["linked"].Error; !strings.Contains(e, "links outside the runs directory") {
			t.Errorf("linked: %q", e)
		}
		if e := list["fifo"].Error; !strings.Contains(e, "not a regular file") {
			t.Errorf("fifo: %q", e)
		}
		for _, p := range []string{"/runs/linked/", "/runs/fifo/", "/runs/fifo/sweep.json"} {
			if res := get(t, s, p); res.StatusCode != http.StatusInternalServerError || strings.Contains(body(t, res), secret) {
				t.Errorf("GET %s: %d", p, res.StatusCode)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("serving a sweep whose sweep.json is a FIFO blocked")
	}
}

// A run removed while the list shows it (or while its report is kept)
// is gone: its pages say so, the list drops it, a diff with it says
// which run is missing.
func TestServeRunRemovedWhileListed(t *testing.T) {
	runs, _ := sweepFixture(t)
	s := newTestServer(t, Config{RunsDir: runs})
	for _, p := range []string{"/", "/runs/solo/", "/runs/bs/r2-bs64-lrnone-wu0/", "/diff?a=solo&b=bs/r2-bs64-lrnone-wu0"} {
		if res := get(t, s, p); res.StatusCode != 200 {
			t.Fatalf("GET %s: %d", p, res.StatusCode)
		}
	}
	must(t, os.RemoveAll(filepath.Join(runs, "solo")))
	must(t, os.RemoveAll(filepath.Join(runs, "bs", "r2-bs64-lrnone-wu0")))
	for p, want := range map[string]string{
		"/runs/solo/":                                            `There is no run &#34;solo&#34; here`,
		"/runs/solo/stats.json":                                  `There is no run \"solo\" here`,
		"/runs/bs/r2-bs64-lrnone-wu0/":                           `There is no run &#34;bs/r2-bs64-lrnone-wu0&#34; here`,
		"/diff?a=solo&b=bs/r2-bs256-lrnone-wu0":                  `A: There is no run &#34;solo&#34;`,
		"/diff?a=bs/r2-bs256-lrnone-wu0&b=bs/r2-bs64-lrnone-wu0": `B: There is no run &#34;bs/r2-bs64-lrnone-wu0&#34;`,
	} {
		res := get(t, s, p)
		if page := body(t, res); res.StatusCode != http.StatusNotFound || !strings.Contains(page, want) {
			t.Errorf("GET %s: %d, want 404 with %s\n%s", p, res.StatusCode, want, page)
		}
	}
	list := apiRuns(t, s)
	if _, ok := list["solo"]; ok {
		t.Error("the list still has solo")
	}
	if bs := list["bs"]; len(bs.Runs) != 2 || bs.Configs != 3 {
		t.Errorf("bs after losing a run: %d runs, %d configurations", len(bs.Runs), bs.Configs)
	}
	// Removing the whole sweep empties its place.
	must(t, os.RemoveAll(filepath.Join(runs, "bs")))
	if res := get(t, s, "/runs/bs/"); res.StatusCode != http.StatusNotFound {
		t.Errorf("a removed sweep: %d", res.StatusCode)
	}
}
