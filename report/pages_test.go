package report

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/analyzetest"
	"github.com/commprof/commprof/trace"
)

// Every definition a page links to names a section docs/metrics.md has,
// and every column's definition exists.
func TestDefinitionsPointAtMetricsSections(t *testing.T) {
	f, err := os.Open("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	anchors := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if h, ok := strings.CutPrefix(sc.Text(), "## "); ok {
			anchors[headingAnchor(h)] = true
		}
	}
	for slug, d := range definitions {
		if d.Slug != slug || d.Text == "" || !anchors[headingAnchor(d.Section)] {
			t.Errorf("definition %q: section %q is not a heading of docs/metrics.md", slug, d.Section)
		}
	}
	for view, cols := range columnDefs {
		for col, slug := range cols {
			if _, ok := definitions[slug]; !ok {
				t.Errorf("view %s, column %s: no definition %q", view, col, slug)
			}
		}
	}
	if got := headingAnchor("Per step (`stats --by step`, `steps[]`, `step_summary`)"); got != "per-step-stats---by-step-steps-step_summary" {
		t.Errorf("anchor %q", got)
	}
}

// stepRun is a one-rank run of n steps whose step i takes (i*7 mod n)+1 µs.
func stepRun(n int) *trace.Run {
	r := &trace.Run{Dir: "d", Manifest: &trace.Manifest{Name: "steps", WorldSize: 1}}
	var evs []trace.Event
	at := int64(0)
	for i := range n {
		d := int64((i*7)%n+1) * 1000
		evs = append(evs, trace.Event{Kind: trace.KindStep, Name: "step", Start: at, Dur: d, Peer: -1, Seq: -1, Step: int32(i), Root: -1, Chunk: -1})
		at += d
	}
	r.Ranks = []trace.Rank{{Info: trace.RankInfo{Rank: 0, WorldSize: 1}, Events: evs}}
	return r
}

// A page's steps table is sorted slowest first by the raw times, carries
// them as sort keys, is cut at the row limit with a note, and is
// collapsed when long.
func TestPageViewSortsSlowestFirst(t *testing.T) {
	s := analyzetest.Summarize(stepRun(40))
	tb := pageView(s, "step", 30)
	col := tb.columnIndex("time")
	if len(tb.Rows) != 30 || len(tb.Keys) != 30 || !strings.Contains(tb.Note, "The 30 costliest of 40 rows") {
		t.Fatalf("%d rows, %d keys, note %q", len(tb.Rows), len(tb.Keys), tb.Note)
	}
	prev := 1e18
	for i, k := range tb.Keys {
		v, err := strconv.ParseFloat(k[col], 64)
		if err != nil || v > prev {
			t.Fatalf("row %d: time key %q after %v", i, k[col], prev)
		}
		prev = v
		// The key is the raw ns of the row's own step.
		step, _ := strconv.Atoi(tb.Rows[i][0])
		if want := float64((step*7)%40+1) * 1000; v != want {
			t.Errorf("row %d (step %d): key %v, want %v", i, step, v, want)
		}
	}
	g := &glossary{}
	h := g.html(tb)
	if h.Collapse != collapsedRows || h.Columns[col].Sorted != "desc" || h.Columns[col].Def != "def-step-time" || len(g.used) == 0 {
		t.Errorf("collapse %d, sorted %q, def %q", h.Collapse, h.Columns[col].Sorted, h.Columns[col].Def)
	}
}

func sweepFixture() *analyze.Sweep {
	mk := func(batch int, rule string, acc, ttt float64) analyze.SweepConfig {
		c := analyze.SweepConfig{BatchSize: batch, GlobalBatch: 4 * batch, Ranks: 4, LRScaling: rule, Warmup: "0", LR: "0.01",
			Runs: []string{fmt.Sprintf("runs/r4-bs%d-lr%s-wu0", batch, rule)}, EpochAccuracy: []float64{acc - 0.1, acc},
			Accuracy: analyze.Range{Mean: acc, Min: acc, Max: acc, N: 1}, EpochNS: analyze.Range{Mean: 1e9, N: 1},
			SamplesPerSec: analyze.Range{Mean: float64(1000 * batch), N: 1}, CommBytesPerSample: analyze.Range{Mean: 1e6 / float64(batch), N: 1}}
		if ttt > 0 {
			c.TimeToTargetNS, c.Reached = analyze.Range{Mean: ttt, Min: ttt, Max: ttt, N: 1}, 1
		}
		return c
	}
	return &analyze.Sweep{Target: 0.8, Configs: []analyze.SweepConfig{
		mk(16, "none", 0.868, 8e9), mk(512, "none", 0.813, 26e9), mk(16, "sqrt", 0.868, 9e9), mk(512, "sqrt", 0.843, 13e9),
		mk(16, "linear", 0.868, 9e9), mk(512, "linear", 0.54, 0)}}
}

// The sweep page answers the batch-size question in its cards and
// findings, with the sweep's own figures.
func TestSweepPage(t *testing.T) {
	var b bytes.Buffer
	if err := WriteSweepHTML(&b, sweepFixture()); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		"Sweep: global batch 64 → 2048, lr none / sqrt / linear",
		"6 configurations, 6 runs",
		"best test accuracy", "86.80%",
		"fastest to 80.0%", "8s",
		"-5.5 points", "81.30% at global batch 2048 against 86.80% at 64",
		"at global batch 2048, lr sqrt reaches 84.30% test accuracy (-2.5 points against batch 64 without a rule)",
		"of the learning-rate rules, lr sqrt keeps the most accuracy at global batch 2048: 84.30%",
		"76.8 → 86.8", // accuracy per epoch
		`<a href="r4-bs512-lrlinear-wu0/">r4-bs512-lrlinear-wu0</a>`,
		`id="chart-sweep-accuracy"`, `id="chart-sweep-epochs"`, `id="def-time-to-target"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the sweep page lacks %q", want)
		}
	}
	if n := strings.Count(page, "<tr>") + strings.Count(page, "<tr "); n != 6+1 {
		t.Errorf("%d table rows, want 6 and the header", n)
	}
	// No repeat of linear at 2048 reached the target: its cell says so and
	// sorts last.
	if !strings.Contains(page, `data-v="Infinity">—</td>`) {
		t.Error("an unreached target is not a dash sorting last")
	}
	// An empty sweep is a page too.
	b.Reset()
	if err := WriteSweepHTML(&b, &analyze.Sweep{}); err != nil || !strings.Contains(b.String(), "Sweep: no runs yet") {
		t.Errorf("empty sweep: %v", err)
	}
}
