package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/trace"
)

var pageTmpl = template.Must(template.New("page").Funcs(template.FuncMap{
	"dur":   units.Duration,
	"bytes": units.Bytes,
	"pct":   func(x float64) string { return units.Percent(x, 0) },
	"value": FormatValue,
	"rel":   FormatRel,
}).Parse(pageHTML))

// card is one key number at the top of a page.
type card struct {
	Label, Value, Detail string
	Class                string // good, bad or ""
	// Def is the slug of the figure's definition; finish turns it into
	// the anchor the label links to, and Tip into its text.
	Def, Tip string
}

// page is what the template draws: a run report or a diff report.
type page struct {
	Title      string
	Subtitle   string
	Kind       string // "run" or "diff"
	Cards      []card
	Findings   []string
	Problems   []string
	Injected   []string // faults injected on purpose, as the manifest lists them
	Diagnosis  []string // the doctor's diagnosis of a run that hung or failed
	Notes      []string // what the page cannot show about this run, and why
	Config     [][2]string
	ConfigA    [][2]string // diff: keys that differ, A and B
	ConfigB    [][2]string
	Lead       []section // sections before the timeline: a benchmark's table
	Sections   []section
	Timeline   template.JS // the timeline's data, JSON; empty for none
	TLNote     string
	DetailURL  string
	SummaryJS  template.JS // the summary (or diff) JSON, for scripts reading the page
	ECharts    template.JS
	Format     template.JS
	Script     template.JS
	TimelineJS template.JS
	Extra      template.JS // scripts of sections that bring their own (waiting.js)
	CSS        template.CSS
	// Defs are the definitions the page's figures link to, drawn at its
	// end; MetricsURL has them all.
	Defs       []definition
	MetricsURL string
}

// finish links the page's cards and table headers to their definitions
// and builds the tables as drawn.
func (p *page) finish() {
	g := &glossary{}
	for i := range p.Cards {
		if slug := p.Cards[i].Def; slug != "" {
			p.Cards[i].Def, p.Cards[i].Tip = g.link(slug), definitions[slug].Text
		}
	}
	for _, secs := range [][]section{p.Lead, p.Sections} {
		for i := range secs {
			secs[i].HTML = nil
			for _, t := range secs[i].Tables {
				secs[i].HTML = append(secs[i].HTML, g.html(t))
			}
		}
	}
	p.Defs, p.MetricsURL = g.used, MetricsURL
}

type section struct {
	ID, Title, Intro string
	Charts           []chartSpec
	Tables           []*Table
	HTML             []htmlTable // the tables as drawn, from finish
	TablesFirst      bool        // tables above the charts
}

// jsonJS marshals v for a <script type="application/json"> element:
// encoding/json escapes <, > and & so nothing in it can close the element.
func jsonJS(v any) (template.JS, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return template.JS(b), nil
}

func assets(p *page) {
	p.ECharts = template.JS(echartsJS)
	p.Format = template.JS(formatJS)
	p.Script = template.JS(reportJS)
	p.TimelineJS = template.JS(timelineJS)
	p.Extra = template.JS(waitingJS)
	p.CSS = template.CSS(reportCSSText)
}

// Options tune the run report.
type Options struct {
	TableRows int // most rows per table (default 500)
	// DetailURL, for a page served with its run, is where the timeline
	// fetches every event of a span it holds only as occupancy:
	// DetailURL?from=NS&to=NS answers with the timeline data of that span.
	DetailURL string
}

// WriteHTML writes the self-contained HTML report of one run: tl is its
// timeline (nil for none).
func WriteHTML(w io.Writer, s *analyze.Summary, tl *Timeline, o Options) error {
	if o.TableRows <= 0 {
		o.TableRows = 500
	}
	p := &page{Kind: "run", Title: runTitle(s.Run), Subtitle: runSubtitle(s.Run), Findings: s.Findings, DetailURL: o.DetailURL}
	if s.Run.Error != "" {
		p.Problems = append(p.Problems, "the run "+s.Run.Status+": "+s.Run.Error)
	}
	p.Problems = append(p.Problems, s.Problems...)
	p.Injected = s.Run.Injected
	if d := s.Diagnosis; !d.Healthy() {
		p.Diagnosis = append([]string{"verdict: " + d.Verdict + culpritText(d)}, d.Summary...)
	}
	switch {
	case s.IsUnknown("compute") && s.IsUnknown("exposed"):
		p.Notes = append(p.Notes, "The compute spans of this run are the tool's own phases, not the program's work: compute, and how much communication the program waited for (exposed) or hid behind its work (overlapped), are unknown and shown as —.")
	case s.IsUnknown("compute"):
		p.Notes = append(p.Notes, "This run's source records the program's communication calls, not its compute between them: compute is unknown and shown as —. Exposed communication is the time the program was blocked in a call or waiting for one to complete; overlapped, the rest of its non-blocking calls' time.")
	}
	if s.IsUnknown("recv_wait") {
		p.Notes = append(p.Notes, "This run's source cannot tell when a message arrived within a receive: the receives' wait for their senders, and the transfer bandwidth apart from it, are unknown and shown as —.")
	}
	p.Notes = append(p.Notes, timeNotes(s)...)
	if s.IsUnknown("span") {
		tl = nil // its events would be placed in order, not in time
	}
	if src := s.Run.Source; src != nil {
		if !src.CollectiveMessages {
			p.Notes = append(p.Notes, fmt.Sprintf("This run was recorded from %s: it holds the program's calls, not the messages inside the collectives, so the traffic matrix, message sizes and patterns show only the program's own point-to-point messages.", sourceName(src.Format)))
		}
		for _, m := range src.Missing {
			p.Notes = append(p.Notes, "Not in the source: "+m+".")
		}
	}
	assets(p)
	p.Cards = unknownTimeCards(s, runCards(s))
	if isBench(s) {
		p.Cards = benchCards(s)
		if what := benchWhat(s); what != "" && what != p.Title {
			p.Subtitle = what + " · " + p.Subtitle
		}
	}
	p.Config = sortedKV(s.Run.Config)
	if tl != nil {
		js, err := jsonJS(tl)
		if err != nil {
			return err
		}
		p.Timeline = js
		switch {
		case tl.Truncated > 0 && o.DetailURL != "":
			p.TLNote = fmt.Sprintf("The whole run is drawn as occupancy, with every event in %d window(s) of detail (%d events). Zoom in anywhere else and the page fetches that span's events from the server. Scroll to zoom, drag to pan, double-click to reset.",
				len(tl.Windows), len(tl.Events.Rank))
		case tl.Truncated > 0:
			p.TLNote = fmt.Sprintf("The whole run is drawn as occupancy; every event is shown in %d window(s) of detail (%d events; %d more are summarized by the occupancy). Scroll to zoom, drag to pan, double-click to reset.",
				len(tl.Windows), len(tl.Events.Rank), tl.Truncated)
		default:
			p.TLNote = fmt.Sprintf("All %d events. Scroll to zoom, drag to pan, double-click to reset; hover an event for its size, peer and bandwidth.", len(tl.Events.Rank))
		}
	}
	var err error
	if p.SummaryJS, err = jsonJS(pageSummary(s)); err != nil {
		return err
	}
	if len(s.Ranks) > manyRanks || s.Matrix.Ranks > manyRanks {
		p.Notes = append(p.Notes, fmt.Sprintf("This run has %d ranks: its charts show percentile bands across ranks with the ranks that stand out, traffic summed by host, and a timeline of those ranks only; "+
			"the page's JSON (#summary-data) leaves out the rank-by-rank traffic matrices, which commprof stats --format json gives.", len(s.Ranks)))
	}
	p.Sections = withoutUnknownTimes(s, runSections(s, o))
	if len(p.Sections) > 0 && p.Sections[0].ID == "bandwidth" {
		p.Lead, p.Sections = p.Sections[:1], p.Sections[1:]
	}
	return render(w, p)
}

func render(w io.Writer, p *page) error {
	p.finish()
	bw := bufio.NewWriterSize(w, 1<<20)
	if err := pageTmpl.Execute(bw, p); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return bw.Flush()
}

func runTitle(r analyze.RunInfo) string {
	if r.Name != "" {
		return r.Name
	}
	return r.Dir
}

func runSubtitle(r analyze.RunInfo) string {
	parts := []string{fmt.Sprintf("%d ranks on %d host(s)", r.WorldSize, max(len(r.Hosts), 1)),
		units.Int(float64(r.Events)) + " events", units.Duration(float64(r.SpanNS)) + " recorded"}
	if r.Source != nil && r.Source.Untimed {
		parts[2] = "no times in the source"
	}
	if r.Start != "" {
		parts = append(parts, "started "+r.Start)
	}
	if r.Status != "" {
		parts = append(parts, r.Status)
	}
	if src := r.Source; src != nil {
		from := "from " + sourceName(src.Format)
		if src.Tool != "" && (src.Format == "pmpi" || src.Format == "pytorch") {
			from += " (" + src.Tool + ")"
		}
		parts = append(parts, from)
	}
	if c := clockNote(r); c != "" {
		parts = append(parts, c)
	}
	if r.Dir != "" {
		parts = append(parts, r.Dir)
	}
	return strings.Join(parts, " · ")
}

// clockNote says how far cross-rank times can be trusted.
func clockNote(r analyze.RunInfo) string {
	switch r.ClockMethod {
	case "":
		return ""
	case "same-host":
		return "one clock for every rank"
	}
	return fmt.Sprintf("clocks aligned by %s to ±%s", r.ClockMethod, units.Duration(float64(r.ClockUncertNS)))
}

func sortedKV(m map[string]string) [][2]string {
	var out [][2]string
	for k, v := range m {
		out = append(out, [2]string{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

func runCards(s *analyze.Summary) []card {
	h := s.Headline
	var cs []card
	if h.Steps > 0 {
		d := fmt.Sprintf("p95 %s over %d steps", units.Duration(h.StepP95NS), h.Steps)
		if h.SamplesPerSec > 0 {
			d += " · " + units.Int(h.SamplesPerSec) + " samples/s"
		}
		cs = append(cs, card{Label: "step time", Value: units.Duration(h.StepNS), Detail: d, Def: "step-time"})
	} else {
		cs = append(cs, card{Label: "run span", Value: units.Duration(float64(s.Run.SpanNS)), Detail: "no training steps recorded", Def: "span"})
	}
	cls := map[bool]string{true: "bad"}[h.CommHigh]
	cs = append(cs, card{Label: "communication", Value: units.Percent(h.CommFraction, 0), Class: cls, Def: "communication",
		Detail: map[bool]string{true: "of the step", false: "of the run, per rank"}[h.Steps > 0]})
	cls = map[bool]string{true: "bad"}[h.ExposedHigh]
	if s.IsUnknown("exposed") {
		cs = append(cs, card{Label: "exposed communication", Value: "unknown", Def: "exposed",
			Detail: "the source does not record when the program waited"})
	} else {
		cs = append(cs, card{Label: "exposed communication", Value: units.Percent(h.ExposedFrac, 0), Class: cls, Def: "exposed",
			Detail: units.Duration(h.ExposedNS) + map[bool]string{true: " per step", false: " per rank"}[h.Steps > 0] + " not hidden by compute"})
	}
	if h.BusBWGBps > 0 {
		d := h.BusBWOp
		if h.TransferBusBWGBps > 1.05*h.BusBWGBps {
			d += " · " + units.GBps(h.TransferBusBWGBps) + " after the last arrival"
		}
		if h.LinkGBps > 0 {
			d += fmt.Sprintf(" · %s of the modelled link (%s)", units.Percent(h.BusBWOfLink, 0), units.GBps(h.LinkGBps))
		}
		cs = append(cs, card{Label: "bus bandwidth", Value: units.GBps(h.BusBWGBps), Detail: d, Def: "busbw"})
	}
	if st := s.Stragglers; st.Replayed {
		// The analyzer's verdict (analyze/stragglers.go), not a re-derivation.
		unit := map[bool]string{true: "step", false: "call"}[st.Basis == "step"]
		c := card{Label: "straggler", Value: "none stands out", Def: "straggler"}
		noise := fmt.Sprintf("noise bound %s at %s", units.Duration(float64(st.NoiseBoundNS)), units.Percent(st.Confidence, 0))
		if st.Undecided != "" {
			c.Value, noise = "no verdict", st.Undecided
		}
		if len(st.Ranks) > 0 {
			rc := st.Ranks[0]
			c.Detail = fmt.Sprintf("by cost: rank %d costliest, %s (%s %s) · %s", rc.Rank,
				units.Duration(float64(rc.CostNS)), units.Percent(rc.Share, 1), ofReplayed(s), noise)
			if st.Why != "" {
				c.Detail += " · not named: " + st.Why
			}
			// Who came last most often is another question (the waiting
			// section's): say so, so that the two do not seem to disagree.
			if last, n, ok := mostOftenLast(s); ok {
				c.Detail += fmt.Sprintf(" · last to arrive most often: rank %d (%d of %d calls)", last, n, s.Skew.Calls)
			}
		}
		if h.Straggler >= 0 {
			c.Value, c.Class = fmt.Sprintf("rank %d", h.Straggler), "bad"
			c.Detail = fmt.Sprintf("costs %s per %s (%s %s, above the %s); without it a %s takes %s, not %s",
				units.Duration(h.StragglerCostNS), unit, units.Percent(h.StragglerShare, 0), ofReplayed(s), noise, unit,
				units.Duration(st.WithoutNS), units.Duration(st.WindowNS))
			for _, rc := range st.Ranks {
				switch {
				case rc.Rank != h.Straggler || rc.CostNS <= 0:
				case !st.SplitKnown:
					c.Detail += " · how it splits between its own work and its transfers is unknown (the run could not be replayed)"
				case st.WorkOnly:
					c.Detail += " · all in its own work between calls (its part of transfers is not judged: the trace does not say when messages arrived)"
				default:
					c.Detail += fmt.Sprintf(" · slow in its own work %s, in its part of transfers %s",
						units.Percent(float64(rc.WorkNS)/float64(rc.CostNS), 0), units.Percent(float64(rc.TransferNS)/float64(rc.CostNS), 0))
				}
			}
			c.Detail += stragglerCPU(s, h.Straggler)
		}
		c.Detail += replaySample(s)
		cs = append(cs, c)
	}
	cs = append(cs, resourceCards(s)...)
	if acc, ok := s.Run.Metrics[trace.MetricTestAccuracy]; ok {
		cs = append(cs, card{Label: "test accuracy", Value: units.Percent(acc, 2), Detail: "final epoch", Def: "accuracy"})
	}
	return cs
}

func runSections(s *analyze.Summary, o Options) []section {
	var secs []section
	bench := isBench(s)
	if bench {
		// A benchmark's answer first: bandwidth by size, as its table.
		sec := section{ID: "bandwidth", Title: "Bus bandwidth by size", Tables: []*Table{benchTable(s)}, TablesFirst: true}
		if c, ok := busbwChart(s); ok {
			sec.Charts = append(sec.Charts, c)
		}
		secs = append(secs, sec)
	}
	if sec, ok := resourcesSection(s); ok {
		secs = append(secs, sec)
	}
	var time []chartSpec
	time = append(time, rankChart(s))
	if c, ok := stepChart(s); ok {
		time = append(time, c)
	}
	secs = append(secs, section{ID: "time", Title: "Where the time goes", Charts: time})
	traffic := []chartSpec{matrixChart(s)}
	if c, ok := opSizeChart(s); ok {
		traffic = append(traffic, c)
	}
	if c, ok := sizeChart(s); ok {
		traffic = append(traffic, c)
	}
	secs = append(secs, section{ID: "traffic", Title: "Traffic", Charts: traffic})
	var skew []chartSpec
	if c, ok := skewChart(s); ok {
		skew = append(skew, c)
	}
	if len(skew) > 0 {
		intro := fmt.Sprintf("Ranks by how often they arrived last, most often first: %s. Who cost time is in the straggler card and the critical path below.", joinInts(s.Skew.Ranking, 8))
		if s.Run.ClockMethod != "" && s.Run.ClockMethod != "same-host" {
			intro += fmt.Sprintf(" The ranks ran on %d hosts whose clocks were aligned by %s exchanges: any arrival difference below ±%s may be the clocks'.",
				len(s.Run.Hosts), s.Run.ClockMethod, units.Duration(float64(s.Run.ClockUncertNS)))
		}
		secs = append(secs, section{ID: "skew", Title: "Arrival skew", Charts: skew, Intro: intro})
	}
	if sec, ok := waitingSection(s); ok {
		secs = append(secs, sec)
	}
	var net []chartSpec
	if c, ok := busbwChart(s); ok && !bench {
		net = append(net, c)
	}
	if c, ok := projectionChart(s); ok {
		net = append(net, c)
	}
	secs = append(secs, section{ID: "network", Title: "Bandwidth, the model and more ranks", Charts: net, Intro: modelIntro(s.Fit)})
	if t := criticalPathTable(s); t != nil {
		secs = append(secs, section{ID: "critical-path", Title: "Critical path of the slowest " + map[bool]string{true: "step", false: "call"}[s.Stragglers.Basis == "step"],
			Tables: []*Table{t}, Intro: criticalPathIntro(s)})
	}
	if pc := patternCharts(s); len(pc) > 0 {
		secs = append(secs, section{ID: "patterns", Title: "Communication patterns", Charts: pc,
			Intro: "The messages of the first sampled call of each op and algorithm, as a graph of who sent to whom."})
	}
	var tables []*Table
	for _, by := range Views {
		tables = append(tables, pageView(s, by, tableLimit(s, by, o.TableRows)))
	}
	secs = append(secs, section{ID: "tables", Title: "Tables", Tables: tables,
		Intro: "The tables of commprof stats, the costliest rows first; click a header to sort by it, a linked header for what it means."})
	return secs
}

// viewOrder is the column a stats view is sorted by on a page, costliest
// first ("" keeps the view's own order).
var viewOrder = map[string]string{"op": "total", "size": "time", "step": "time", "peer": "bytes", "memory": "peak rss"}

// pageView is a stats view for a page: sort keys, definitions, the
// costliest rows first, at most limit rows.
func pageView(s *analyze.Summary, by string, limit int) *Table {
	t, _ := View(s, by, false)
	raw, _ := View(s, by, true)
	if len(raw.Rows) == len(t.Rows) {
		t.Keys = raw.Rows
	}
	t.Defs = columnDefs[by]
	if col := t.columnIndex(viewOrder[by]); col >= 0 {
		t.sortBy(col, true)
	}
	if n := len(t.Rows); n > limit {
		if col := t.columnIndex(truncatedOrder[by]); col >= 0 {
			t.sortBy(col, true)
		}
		rest := restSummed(t, by, limit)
		t.Rows = t.Rows[:limit]
		if t.Keys != nil {
			t.Keys = t.Keys[:limit]
		}
		t.Note = fmt.Sprintf("The %d costliest of %d rows%s; commprof stats --by %s prints all.", limit, n, rest, by)
	}
	return t
}

func joinInts(l []int, n int) string {
	var s []string
	for i, x := range l {
		if i >= n {
			s = append(s, "…")
			break
		}
		s = append(s, fmt.Sprint(x))
	}
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// WriteDiffHTML writes the self-contained HTML report of a diff.
func WriteDiffHTML(w io.Writer, a, b *analyze.Summary, d *analyze.Diff) error {
	title := d.Title
	if title == "" || title == "same configuration" {
		title = fmt.Sprintf("%s → %s", runTitle(a.Run), runTitle(b.Run))
	}
	p := &page{Kind: "diff", Title: title,
		Subtitle: fmt.Sprintf("A: %s  ·  B: %s  ·  figures per %s", runSubtitle(a.Run), runSubtitle(b.Run), d.Basis)}
	if d.PerSample {
		p.Subtitle += " and per sample"
	}
	assets(p)
	unset := func(v string) string {
		if v == "" {
			return "(unset)"
		}
		return v
	}
	for _, c := range d.Config {
		p.ConfigA = append(p.ConfigA, [2]string{c.Key, unset(c.A)})
		p.ConfigB = append(p.ConfigB, [2]string{c.Key, unset(c.B)})
	}
	p.Cards = outcomeCards(d)
	if len(p.Cards) == 0 {
		p.Cards = diffCards(d)
	}
	p.Problems = append(append([]string{}, a.Problems...), b.Problems...)
	// The changes that move the time per sample most, with how much
	// (the diff ranks them first); without any, the largest changes.
	per := "sample"
	if !d.PerSample {
		per = d.Basis
	}
	if l := FormatLoad(d); l != "" {
		p.Findings = append(p.Findings, "Machine load: "+l+".")
	}
	for _, c := range d.Changes {
		if len(p.Findings) >= 6 || c.EffectNS == 0 {
			break
		}
		p.Findings = append(p.Findings, fmt.Sprintf("%s: %s → %s (%s), %s per %s", c.Metric, FormatValue(c.A, c.Unit), FormatValue(c.B, c.Unit),
			FormatRel(c), signed(c.EffectNS), per))
	}
	for i, c := range d.Changes {
		if d.Changes[0].EffectNS != 0 || i >= 6 {
			break
		}
		if c.Rel != nil && c.B != 0 {
			p.Findings = append(p.Findings, fmt.Sprintf("%s: %s → %s (%s)", c.Metric, FormatValue(c.A, c.Unit), FormatValue(c.B, c.Unit), FormatRel(c)))
		}
	}
	var err error
	if p.SummaryJS, err = jsonJS(d); err != nil {
		return err
	}
	p.Sections = diffSections(a, b, d)
	if len(d.Outcomes) > 0 {
		t := OutcomeTable(d)
		t.Title, t.Full = "", true
		p.Lead = []section{{ID: "outcomes", Title: "Outcomes", Tables: []*Table{t},
			Intro: "What the configuration was changed for, B against A: " + FormatOutcomeBasis(d) + "."}}
	}
	return render(w, p)
}

// outcomeCards are the diff's outcomes as cards: B's figure, A's and the
// change, coloured by the diff's verdict.
func outcomeCards(d *analyze.Diff) []card {
	var cs []card
	for _, c := range d.Outcomes {
		cd := card{Label: c.Metric, Value: FormatValue(c.B, c.Unit), Detail: "A " + FormatValue(c.A, c.Unit) + " · " + FormatRel(c),
			Def: changeDef(c)}
		switch c.Verdict {
		case "better":
			cd.Class = "good"
		case "worse":
			cd.Class = "bad"
		}
		cs = append(cs, cd)
	}
	return cs
}

// FormatOutcomeBasis says what a diff's per-sample figures are divided by.
func FormatOutcomeBasis(d *analyze.Diff) string {
	if d.PerSample {
		return fmt.Sprintf("per-sample figures use the global batch, %d samples per step in A and %d in B", d.A.SamplesPerStep, d.B.SamplesPerStep)
	}
	return "the runs do not both name a batch size, so there are no per-sample figures"
}

// diffCards are the headline figures of B against A (analyze.Diff's
// Headline), coloured by its verdicts.
func diffCards(d *analyze.Diff) []card {
	var cs []card
	for _, c := range d.Headline {
		cd := card{Label: c.Metric, Value: FormatValue(c.B, c.Unit), Detail: "A: none", Class: verdictClass(c.Verdict), Def: changeDef(c)}
		if c.A != 0 {
			cd.Detail = "A " + FormatValue(c.A, c.Unit) + " · " + FormatRel(c)
		}
		cs = append(cs, cd)
	}
	return cs
}

func sourceName(format string) string {
	switch format {
	case "pmpi":
		return "an MPI program through the PMPI library"
	case "horovod":
		return "a Horovod timeline"
	case "pytorch":
		return "a PyTorch job through torch.distributed"
	case "kineto":
		return "PyTorch profiler traces"
	case "nccl-log":
		return "NCCL debug logs"
	case "nccl-inspector":
		return "NCCL Inspector logs"
	case "nccl-tests":
		return "nccl-tests output"
	case "synthetic":
		return "a generator of synthetic runs: it is not a measured run"
	}
	return format
}

// modelIntro says what the alpha-beta-gamma model is, or why there is none.
func modelIntro(f analyze.Fit) string {
	if !f.Usable {
		if f.Reason == "" {
			return "No alpha-beta-gamma model: the run has no collective calls it covers."
		}
		return "No alpha-beta-gamma model is shown: " + f.Reason + "."
	}
	from := "this run's calls"
	switch f.Source {
	case "runs":
		from = "these runs' calls"
	case "run":
	default:
		from = "the calibration " + f.Source
	}
	return fmt.Sprintf("Model from %s (%d calls of %d sizes on %v ranks): α %s per step, β %.4g ns/byte (%s; by message size where calibrated), γ %.4g ns/byte from %s; R² %.2f, median error %s. docs/metrics.md gives the formulas and what the model leaves out.",
		from, f.Calls, f.Sizes, f.RankCounts, units.Duration(f.AlphaNS), f.BetaNSPerB, units.GBps(f.LinkGBps), f.GammaNSPerB, f.GammaFrom, f.CallR2, units.Percent(f.MedianError, 0))
}

// criticalPathTable lists the slowest window's critical path.
func criticalPathTable(s *analyze.Summary) *Table {
	cp := s.Stragglers.CriticalPath
	if cp == nil || len(cp.Segments) == 0 {
		return nil
	}
	t := &Table{Columns: []Column{{Name: "from", Numeric: true}, {Name: "to", Numeric: true}, {Name: "rank", Numeric: true},
		{Name: "what"}, {Name: "time", Numeric: true}},
		Defs: map[string]string{"from": "critical-path", "to": "critical-path", "time": "critical-path"}}
	segs := cp.Segments
	const most = 60
	if len(segs) > most {
		t.Title = fmt.Sprintf("the last %d of %d segments", most, len(segs))
		segs = segs[len(segs)-most:]
	}
	for _, sg := range segs {
		what := sg.What
		if sg.Kind == "work" {
			what = "own work " + what
		}
		t.Rows = append(t.Rows, []string{units.Duration(float64(sg.StartNS - cp.StartNS)), units.Duration(float64(sg.EndNS - cp.StartNS)),
			fmt.Sprint(sg.Rank), what, units.Duration(float64(sg.EndNS - sg.StartNS))})
	}
	return t
}

func criticalPathIntro(s *analyze.Summary) string {
	cp := s.Stragglers.CriticalPath
	total := float64(cp.EndNS - cp.StartNS)
	var parts []string
	for r, ns := range cp.ByRank {
		parts = append(parts, fmt.Sprintf("rank %d's own work %s", r, units.Duration(float64(ns))))
	}
	sort.Strings(parts)
	what := fmt.Sprintf("the slowest call (%s after the one before it)", units.Duration(total))
	if s.Stragglers.Basis == "step" {
		what = fmt.Sprintf("step %d (%s from its first rank's start to its last rank's end)", cp.Window, units.Duration(total))
		for _, st := range s.Steps {
			if st.Step == cp.Window {
				what = fmt.Sprintf("step %d, the slowest in the steps table (%s on the mean rank, %s on its slowest; %s from its first rank's start to its last rank's end)",
					cp.Window, units.Duration(st.TimeNS), units.Duration(float64(st.MaxNS)), units.Duration(total))
			}
		}
	}
	return fmt.Sprintf("What set the length of %s: the chain of work and waits from its start to its end across ranks, as the replay of the run found it. On it: %s, and %s moving data.",
		what, strings.Join(parts, ", "), units.Duration(float64(cp.CommNS)))
}

// culpritText names a diagnosis's culprits after its verdict.
func culpritText(d *analyze.Diagnosis) string {
	if len(d.Culprits) == 0 {
		return ""
	}
	return "; culprit: " + analyze.RankList(d.Culprits)
}

// ofReplayed is what a straggler's share is of: the run, or the stretch
// of it replayed.
func ofReplayed(s *analyze.Summary) string {
	if s.Stragglers.Sample != nil {
		return "of the stretch replayed"
	}
	return "of the run"
}

// replaySample says which stretch of a long run the replay covered; ""
// when it covered all of it.
func replaySample(s *analyze.Summary) string {
	sm := s.Stragglers.Sample
	if sm == nil || sm.TotalOps == 0 {
		return ""
	}
	share, from, to := sm.Describe(s.Run.FirstNS)
	return fmt.Sprintf(" · replayed over %s of the run's %s operations, %s to %s into it (the run is too long to replay whole)",
		share, units.Int(float64(sm.TotalOps)), from, to)
}
