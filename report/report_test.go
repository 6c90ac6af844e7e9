package report

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/analyze/analyzetest"
	"github.com/commprof/commprof/trace"
)

const evil = `</script><script>alert(1)</script>`

// run builds a small two-rank run whose strings are hostile.
func run() *trace.Run {
	r := &trace.Run{Dir: "d", Manifest: &trace.Manifest{Name: evil, WorldSize: 2, Config: map[string]string{"model": evil, "batch_size": "8"}}}
	for rank := range int32(2) {
		peer := 1 - rank
		evs := []trace.Event{
			{Rank: rank, Kind: trace.KindStep, Name: "step", Start: 0, Dur: 1000, Peer: -1, Seq: -1, Step: 0, Root: -1, Chunk: -1},
			{Rank: rank, Kind: trace.KindCompute, Name: evil, Start: 0, Dur: 500, Peer: -1, Seq: -1, Step: 0, Root: -1, Chunk: -1},
			{Rank: rank, Kind: trace.KindCollective, Name: "allreduce", Start: 400 + int64(rank)*50, Dur: 400, Bytes: 4096, Peer: -1, Seq: 0, Step: 0, Algo: evil, Root: -1, Chunk: -1, Comm: "world"},
			{Rank: rank, Kind: trace.KindSend, Name: "allreduce", Start: 500, Dur: 100, Bytes: 4096, Peer: peer, Seq: 0, Step: 0, Algo: evil, Root: -1, Chunk: 0, Comm: "world"},
			{Rank: rank, Kind: trace.KindRecv, Name: "allreduce", Start: 550, Dur: 200, Bytes: 4096, Peer: peer, Seq: 0, Step: 0, Algo: evil, Root: -1, Chunk: 0, Comm: "world", Wait: 20},
		}
		r.Ranks = append(r.Ranks, trace.Rank{Info: trace.RankInfo{Rank: int(rank), WorldSize: 2, Host: evil}, Events: evs})
	}
	return r
}

func TestViewsAndCSV(t *testing.T) {
	s := analyzetest.Summarize(run())
	for _, by := range Views {
		tb, err := View(s, by, true)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := tb.WriteCSV(&buf); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) < 2 {
			t.Errorf("--by %s: %d CSV lines\n%s", by, len(lines), buf.String())
		}
		if strings.Contains(lines[0], " ") {
			t.Errorf("--by %s: CSV header with spaces: %s", by, lines[0])
		}
	}
	if _, err := View(s, "colour", false); err == nil {
		t.Error("an unknown view is an error")
	}
	if got := csvName(Column{Name: "recv time", Unit: "ns"}); got != "recv_time_ns" {
		t.Errorf("csvName = %q", got)
	}
}

func TestHTMLIsSelfContainedAndEscaped(t *testing.T) {
	r := run()
	s := analyzetest.Summarize(r)
	tl := timelineOf(s, r, TimelineOptions{})
	if len(tl.Events.Rank) != 10 || len(tl.Links) != 2 {
		t.Fatalf("timeline: %d events, %d links", len(tl.Events.Rank), len(tl.Links))
	}
	var buf bytes.Buffer
	if err := WriteHTML(&buf, s, tl, Options{}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	// The hostile string never appears raw: only escaped, as text or JSON.
	if strings.Contains(page, evil) || strings.Contains(page, "<script>alert") {
		t.Fatal("a trace string reached the page unescaped")
	}
	if !strings.Contains(page, "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Fatal("the name is not shown as text")
	}
	// Nothing is fetched: no src or href leaves the page, but for the
	// links a reader may follow to the full definitions.
	for _, m := range regexp.MustCompile(`(?i)(src|href)="(https?:)?//[^"]*`).FindAllString(page, -1) {
		if m != `href="`+MetricsURL && !strings.HasPrefix(m, `href="`+MetricsURL+"#") {
			t.Fatalf("the page links out: %s", m)
		}
	}
	// Every chart has its options, and they parse.
	ids := regexp.MustCompile(`id="(chart-[a-z0-9-]+)" data-chart`).FindAllStringSubmatch(page, -1)
	if len(ids) < 8 {
		t.Fatalf("%d charts", len(ids))
	}
	for _, id := range ids {
		re := regexp.MustCompile(`<script type="application/json" data-spec-for="` + id[1] + `">(.*?)</script>`)
		m := re.FindStringSubmatch(page)
		var v []chartVariant
		if m == nil || json.Unmarshal([]byte(m[1]), &v) != nil || len(v) == 0 || len(v[0].Option) == 0 {
			t.Fatalf("chart %s has no usable options", id[1])
		}
	}
}

// TestStragglerCard shows the analyzer's verdict: a named rank with what
// it cost, or none, and never a verdict of its own.
func TestStragglerCard(t *testing.T) {
	get := func(named bool) card {
		s := &analyze.Summary{Run: analyze.RunInfo{WorldSize: 4}}
		s.Headline.Straggler = -1
		s.Stragglers = analyze.Stragglers{Replayed: true, Basis: "step", WindowNS: 30e6, WithoutNS: 20e6,
			Ranks: []analyze.RankCost{{Rank: 3, CostNS: 1e9, Share: 0.33, PerWindowNS: 10e6}}}
		if named {
			s.Stragglers.Named = []int{3}
			s.Headline.Straggler, s.Headline.StragglerCostNS, s.Headline.StragglerShare = 3, 10e6, 0.33
		}
		for _, c := range runCards(s) {
			if c.Label == "straggler" {
				return c
			}
		}
		t.Fatal("no straggler card")
		return card{}
	}
	if c := get(true); c.Value != "rank 3" || c.Class != "bad" || !strings.Contains(c.Detail, "costs 10 ms per step") || !strings.Contains(c.Detail, "takes 20 ms, not 30 ms") {
		t.Errorf("a named straggler: %+v", c)
	}
	if c := get(false); c.Value != "none stands out" || c.Class == "bad" || !strings.Contains(c.Detail, "rank 3 costliest") {
		t.Errorf("none named: %+v", c)
	}
}

// TestDiffCardsShowTheVerdicts: the cards are the diff's headline, each
// coloured by its verdict, none for a figure without one.
func TestDiffCardsShowTheVerdicts(t *testing.T) {
	rel := func(r float64) *float64 { return &r }
	d := &analyze.Diff{Headline: []analyze.Change{
		{ID: "headline.step_time", Def: "step-time", Section: "headline", Metric: "step time", Unit: "ns", A: 1e6, B: 2e6, Rel: rel(1)},
		{ID: "headline.busbw", Def: "busbw", Section: "headline", Metric: "bus bandwidth", Unit: "GB/s", A: 1, B: 2, Rel: rel(1), Verdict: "better"},
		{ID: "headline.wait_fraction", Def: "wait", Section: "headline", Metric: "arrival wait", Unit: "fraction", A: 0.1, B: 0.2, Rel: rel(1), Verdict: "worse"},
		{ID: "headline.test_accuracy", Def: "accuracy", Section: "headline", Metric: "test accuracy", Unit: "fraction", A: 0, B: 0.9},
	}}
	cs := diffCards(d)
	if len(cs) != 4 {
		t.Fatalf("%d cards for 4 figures", len(cs))
	}
	for i, want := range []struct{ label, value, detail, class string }{
		{"step time", "2 ms", "A 1 ms · +100.0%", ""},
		{"bus bandwidth", "2 GB/s", "A 1 GB/s · +100.0%", "good"},
		{"arrival wait", "20%", "A 10% · +100.0%", "bad"},
		{"test accuracy", "90%", "A: none", ""},
	} {
		if c := cs[i]; c.Label != want.label || c.Value != want.value || c.Detail != want.detail || c.Class != want.class || c.Def == "" {
			t.Errorf("card %d: %+v, want %+v with a definition", i, c, want)
		}
	}
}

// The diff page's findings are the changes that move the time per sample
// most, with how much; a diff without such changes lists its largest.
func TestDiffFindingsLeadWithEffect(t *testing.T) {
	rel := func(r float64) *float64 { return &r }
	s := analyzetest.Summarize(run())
	d := &analyze.Diff{Basis: "step", PerSample: true, Changes: []analyze.Change{
		{Section: "step", Metric: "compute per step", Unit: "ns", A: 1e6, B: 3e6, Rel: rel(2), EffectNS: 2000},
		{Section: "step", Metric: "communication fraction", Unit: "fraction", A: 0.1, B: 0.2, Rel: rel(1)},
	}}
	var b bytes.Buffer
	if err := WriteDiffHTML(&b, s, s, d); err != nil {
		t.Fatal(err)
	}
	if page := b.String(); !strings.Contains(page, "compute per step: 1 ms → 3 ms (&#43;200.0%), &#43;2 µs per sample") || strings.Contains(page, "communication fraction: 10%") {
		t.Errorf("findings with an effect: %s", regexp.MustCompile(`(?s)<ul class="cp-findings".*?</ul>`).FindString(page))
	}
	d.Changes[0].EffectNS = 0
	b.Reset()
	if err := WriteDiffHTML(&b, s, s, d); err != nil {
		t.Fatal(err)
	}
	if page := b.String(); !strings.Contains(page, "communication fraction: 10% → 20% (&#43;100.0%)") {
		t.Errorf("findings without effects: %s", regexp.MustCompile(`(?s)<ul class="cp-findings".*?</ul>`).FindString(page))
	}
}

// TestColumnsSayTheirUnits: a column whose cells are bare fractional
// numbers (bandwidths: 0.021) names its unit in its header, in the
// terminal's tables and on the page; durations, sizes and percentages
// carry theirs in every cell.
func TestColumnsSayTheirUnits(t *testing.T) {
	s := analyzetest.Summarize(run())
	tables := []*Table{benchTable(s)}
	for _, by := range Views {
		tb, err := View(s, by, false)
		if err != nil {
			t.Fatal(err)
		}
		tables = append(tables, tb)
	}
	g := &glossary{}
	for _, tb := range tables {
		var text bytes.Buffer
		if err := tb.WriteText(&text); err != nil {
			t.Fatal(err)
		}
		header, _, _ := strings.Cut(text.String(), "\n")
		page := g.html(tb)
		for i, c := range tb.Columns {
			bare := len(tb.Rows) > 0
			for _, r := range tb.Rows {
				if _, err := strconv.ParseFloat(r[i], 64); err != nil || !strings.Contains(r[i], ".") {
					bare = false
				}
			}
			if !bare {
				continue
			}
			if c.Unit == "" || !strings.Contains(c.Header(), c.Unit) || !strings.Contains(header, c.Header()) || page.Columns[i].Name != c.Header() {
				t.Errorf("%s: column %q holds bare numbers (%s) and its header %q names no unit (text: %q, page: %q)",
					tb.Title, c.Name, tb.Rows[0][i], c.Header(), header, page.Columns[i].Name)
			}
		}
	}
}

// TestBusbwChartDrawsOnlyAShownModel: the busbw chart draws the model's
// lines only where the model section shows a model; a fit the analyzer
// judged unusable (its figures are still in the summary) draws none, and
// the chart's note does not speak of one.
func TestBusbwChartDrawsOnlyAShownModel(t *testing.T) {
	s := analyzetest.Summarize(run())
	s.Fit.AlphaNS, s.Fit.BetaNSPerB = 20_000, 0.5
	for _, usable := range []bool{true, false} {
		s.Fit.Usable = usable
		c, ok := busbwChart(s)
		if !ok {
			t.Fatal("no busbw chart")
		}
		model := strings.Contains(string(c.Variants[0].Option), "(model)")
		if model != usable || strings.Contains(c.Note, "model") != usable {
			t.Errorf("usable %v: model lines %v, note %q", usable, model, c.Note)
		}
	}
}
