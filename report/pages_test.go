package report

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/analyze/analyzetest"
	"github.com/commprof/commprof/load"
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

// sweepFixture is a sweep as analyze.NewSweep leaves it: configurations,
// their lines, the picks and the findings (written here by hand: the
// page only shows them).
func sweepFixture() *analyze.Sweep {
	mk := func(batch int, rule string, acc, ttt float64) analyze.SweepConfig {
		c := analyze.SweepConfig{BatchSize: batch, GlobalBatch: 4 * batch, Ranks: 4, LRScaling: rule, Warmup: "0", LR: "0.01", Group: "lr " + rule,
			Runs: []string{fmt.Sprintf("runs/r4-bs%d-lr%s-wu0", batch, rule)}, EpochAccuracy: []float64{acc - 0.1, acc},
			Accuracy: analyze.Range{Mean: acc, Median: acc, Min: acc, Max: acc, N: 1}, EpochNS: analyze.Range{Mean: 1e9, Median: 1e9, N: 1},
			SamplesPerSec:      analyze.Range{Mean: float64(1000 * batch), Median: float64(1000 * batch), N: 1},
			CommBytesPerSample: analyze.Range{Mean: 1e6 / float64(batch), Median: 1e6 / float64(batch), N: 1}}
		if ttt > 0 {
			c.TimeToTargetNS, c.Reached = analyze.Range{Mean: ttt, Median: ttt, Min: ttt, Max: ttt, N: 1}, 1
		}
		return c
	}
	pick := func(i int) *int { return &i }
	return &analyze.Sweep{Target: 0.8, Configs: []analyze.SweepConfig{
		mk(16, "none", 0.868, 8e9), mk(512, "none", 0.813, 26e9), mk(16, "sqrt", 0.868, 9e9), mk(512, "sqrt", 0.843, 13e9),
		mk(16, "linear", 0.868, 9e9), mk(512, "linear", 0.54, 0)},
		BestAccuracy: pick(0), FastestToTarget: pick(0), HighestThroughput: pick(5),
		NoRule:   &analyze.SweepEnds{Smallest: 0, Largest: 1, AccuracyChange: 0.813 - 0.868, Verdict: "worse"},
		Findings: []string{"a finding of the analysis"}}
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
		"best test accuracy", "86.8%",
		"fastest to 80%", "8 s",
		"-5.5 points", "81.3% at global batch 2048 against 86.8% at 64",
		"a finding of the analysis", "highest throughput", "512000/s",
		"76.8 → 86.8", // accuracy per epoch
		`<a href="r4-bs512-lrlinear-wu0/report.html">report</a>`,
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

// Every figure on every page links to its definition: each card's label,
// each column's header but those that name rather than measure (op,
// rank, host ...), and each row of a table whose rows are figures (a
// diff's "metric" column); and every link has its definition on the page.
func TestEveryFigureIsDefined(t *testing.T) {
	ctx := context.Background()
	train, err := load.Load(ctx, "../testdata/runs/train", TimelineKeep(1<<26))
	if err != nil {
		t.Fatal(err)
	}
	bench, err := load.Summary(ctx, "../testdata/runs/bench")
	if err != nil {
		t.Fatal(err)
	}
	noSteps := run()
	for i := range noSteps.Ranks {
		noSteps.Ranks[i].Events = slices.DeleteFunc(noSteps.Ranks[i].Events, func(e trace.Event) bool { return e.Kind == trace.KindStep })
	}
	pages := map[string]func(w io.Writer) error{
		"train run": func(w io.Writer) error {
			tl, err := BuildTimeline(ctx, train, TimelineOptions{Detail: 1000})
			if err != nil {
				return err
			}
			return WriteHTML(w, train.Summary, tl, Options{})
		},
		"bench run":         func(w io.Writer) error { return WriteHTML(w, bench, nil, Options{}) },
		"run without steps": func(w io.Writer) error { return WriteHTML(w, analyzetest.Summarize(noSteps), nil, Options{}) },
		"diff with outcomes": func(w io.Writer) error {
			return WriteDiffHTML(w, train.Summary, train.Summary, analyze.Compare(train.Summary, train.Summary))
		},
		"diff of benchmarks": func(w io.Writer) error { return WriteDiffHTML(w, bench, bench, analyze.Compare(bench, bench)) },
		"sweep":              func(w io.Writer) error { return WriteSweepHTML(w, sweepFixture()) },
	}
	// Columns that name what a row is about rather than measure it.
	names := map[string]bool{"op": true, "algo": true, "size": true, "host": true, "rank": true, "step": true, "src": true, "dst": true,
		"what": true, "runs": true, "section": true, "metric": true, "A": true, "B": true, "": true, "tensor": true, "label": true}
	var (
		cardRE  = regexp.MustCompile(`(?s)<div class="cp-card"[^>]*><div class="cp-card-label">(.*?)</div>`)
		tableRE = regexp.MustCompile(`(?s)<table class="cp-table"[^>]*>(.*?)</table>`)
		thRE    = regexp.MustCompile(`(?s)<th(?:\s[^>]*)?>(.*?)</th>`)
		trRE    = regexp.MustCompile(`(?s)<tr[^>]*>(.*?)</tr>`)
		tdRE    = regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`)
		defRE   = regexp.MustCompile(`^<a href="#(def-[a-z0-9-]+)"`)
		tagRE   = regexp.MustCompile(`<[^>]+>`)
	)
	for name, write := range pages {
		var b bytes.Buffer
		if err := write(&b); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		page := b.String()
		linked := func(what, cell string) {
			m := defRE.FindStringSubmatch(cell)
			switch {
			case m == nil:
				t.Errorf("%s: %s is not linked to its definition: %s", name, what, cell)
			case !strings.Contains(page, `<dt id="`+m[1]+`">`):
				t.Errorf("%s: %s links to %s, which the page does not define", name, what, m[1])
			}
		}
		cards := cardRE.FindAllStringSubmatch(page, -1)
		if len(cards) == 0 {
			t.Errorf("%s: no cards", name)
		}
		for _, c := range cards {
			linked("card "+tagRE.ReplaceAllString(c[1], ""), c[1])
		}
		tables := tableRE.FindAllStringSubmatch(page, -1)
		if len(tables) == 0 {
			t.Errorf("%s: no tables", name)
		}
		for _, tb := range tables {
			metric := -1
			for i, th := range thRE.FindAllStringSubmatch(tb[1], -1) {
				col := html.UnescapeString(tagRE.ReplaceAllString(th[1], ""))
				if col == "metric" {
					metric = i
				}
				if !names[col] {
					linked("column "+col, th[1])
				}
			}
			if metric < 0 {
				continue
			}
			rows := trRE.FindAllStringSubmatch(tb[1], -1)
			for _, tr := range rows[1:] {
				if cells := tdRE.FindAllStringSubmatch(tr[1], -1); len(cells) > metric {
					linked("row "+tagRE.ReplaceAllString(cells[metric][1], ""), cells[metric][1])
				}
			}
		}
	}
}

// TestSweepOfOneEpoch: runs of one epoch each have no accuracy-by-epoch
// chart (one point per line is a dot), and the page says why.
func TestSweepOfOneEpoch(t *testing.T) {
	sw := sweepFixture()
	for i := range sw.Configs {
		sw.Configs[i].EpochAccuracy = sw.Configs[i].EpochAccuracy[1:]
	}
	var b bytes.Buffer
	if err := WriteSweepHTML(&b, sw); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if strings.Contains(page, `id="chart-sweep-epochs"`) || !strings.Contains(page, "No chart of the accuracy epoch by epoch") ||
		!strings.Contains(page, `id="chart-sweep-accuracy"`) {
		t.Error("a sweep of one-epoch runs draws the epoch chart, or does not say why it has none")
	}
}

// Every change of a diff carries an ID of its own and the slug of a
// definition the pages have, so that nothing matches a change by its
// English name.
func TestDiffChangesHaveIDsAndDefinitions(t *testing.T) {
	ctx := context.Background()
	for _, dir := range []string{"../testdata/runs/train", "../testdata/runs/bench"} {
		s, err := load.Summary(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		d := analyze.Compare(s, s)
		seen := map[string]bool{}
		all := append(append(slices.Clone(d.Outcomes), d.Changes...), d.Headline...)
		if len(all) < 10 {
			t.Fatalf("%s: %d changes", dir, len(all))
		}
		for _, c := range all {
			if c.ID == "" || seen[c.ID] {
				t.Errorf("%s: %q has ID %q (empty or seen before)", dir, c.Metric, c.ID)
			}
			seen[c.ID] = true
			if _, ok := definitions[c.Def]; !ok {
				t.Errorf("%s: %q (%s) has definition %q, which the pages do not have", dir, c.Metric, c.ID, c.Def)
			}
		}
	}
}
