package report

import (
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/units"
)

// waitingJS adds the tooltip of the waiting section's chart to the
// global CommprofTooltips, which report.js consults for chart tooltips it
// does not draw itself; pages inline it before report.js.
//
//go:embed assets/waiting.js
var waitingJS string

// waitingSection is "Who kept the others waiting": per label (a Horovod
// tensor, a process group), the arrival skew of its calls, the wait they
// cost the ranks and who came last, from Skew.ByLabel; and every labelled
// call's skew over time, coloured by the rank that came last, from
// Skew.LabelSeries. It is drawn when the run has labelled calls that
// several ranks recorded.
func waitingSection(s *analyze.Summary) (section, bool) {
	if len(s.Skew.ByLabel) == 0 || s.IsUnknown("skew") {
		return section{}, false
	}
	what := "label"
	if src := s.Run.Source; src != nil && src.Format == "horovod" {
		what = "tensor"
	}
	sec := section{ID: "waiting", Title: "Who kept the others waiting", Intro: waitingIntro(s, what), TablesFirst: true,
		Tables: []*Table{waitingTable(s, what)}}
	if c, ok := waitingChart(s, what); ok {
		sec.Charts = append(sec.Charts, c)
	}
	return sec, true
}

// waitingIntro says what the section shows, who came last most often,
// and how that relates to the straggler card (which weighs cost, not
// order of arrival).
func waitingIntro(s *analyze.Summary, what string) string {
	var b strings.Builder
	calls := int64(0)
	for _, l := range s.Skew.ByLabel {
		calls += l.Calls
	}
	fmt.Fprintf(&b, "Every %s's calls that several ranks recorded (%d calls of %d %ss", what, calls, len(s.Skew.ByLabel), what)
	if src := s.Run.Source; src != nil && src.Format == "horovod" {
		b.WriteString(": the negotiations whose ticks give every rank's readiness")
	}
	b.WriteString("): how far apart the ranks arrived (skew), the time the ranks together spent waiting for the last one (wait caused), and the rank that came last, with how long it kept the next latest rank waiting, summed over its calls. The costliest first.")
	if last, n, ok := mostOftenLast(s); ok {
		fmt.Fprintf(&b, " Last to arrive most often: rank %d, in %d of the run's %d multi-rank calls.", last, n, s.Skew.Calls)
	}
	st := s.Stragglers
	switch {
	case !st.Replayed:
	case s.Headline.Straggler >= 0:
		fmt.Fprintf(&b, " Arriving last is not the same as costing time: the straggler card names rank %d by what its lateness cost the run.", s.Headline.Straggler)
	default:
		b.WriteString(" Arriving last is not the same as costing time: the straggler card weighs what each rank's lateness cost the run, and by that measure none stands out.")
	}
	return b.String()
}

// mostOftenLast is the rank that arrived last in the most multi-rank
// calls (the head of the skew ranking) and in how many.
func mostOftenLast(s *analyze.Summary) (rank int, n int64, ok bool) {
	if len(s.Skew.Ranking) == 0 {
		return 0, 0, false
	}
	rank = s.Skew.Ranking[0]
	for _, r := range s.Ranks {
		if r.Rank == rank {
			n = r.LastArrivals
		}
	}
	return rank, n, n > 0
}

// waitingTable lists the labels, the costliest (most wait caused) first.
func waitingTable(s *analyze.Summary, what string) *Table {
	t := &Table{Columns: []Column{{Name: what}, {Name: "op"}, {Name: "calls", Numeric: true}, {Name: "skew p50", Numeric: true},
		{Name: "skew max", Numeric: true}, {Name: "wait caused", Numeric: true}, {Name: "last to arrive (calls, time the next latest waited)"}},
		Defs: map[string]string{"calls": "calls", "skew p50": "skew", "skew max": "skew", "wait caused": "wait",
			"last to arrive (calls, time the next latest waited)": "last"}}
	names := shortLabels(s.Skew.ByLabel)
	for i, l := range s.Skew.ByLabel {
		var last []string
		for j, lr := range l.Last {
			if j == 3 {
				last = append(last, fmt.Sprintf("%d more", len(l.Last)-j))
				break
			}
			last = append(last, fmt.Sprintf("rank %d (%d, +%s)", lr.Rank, lr.Calls, units.Duration(float64(lr.LateNS))))
		}
		lastKey := "-1"
		if len(l.Last) > 0 {
			lastKey = strconv.Itoa(l.Last[0].Rank)
		}
		if len(last) == 0 {
			last = []string{"all at once"}
		}
		t.Rows = append(t.Rows, []string{names[i], l.Op, strconv.FormatInt(l.Calls, 10), units.Duration(float64(l.Dist.P50)),
			units.Duration(float64(l.Dist.Max)), units.Duration(float64(l.WaitNS)), strings.Join(last, "; ")})
		t.Keys = append(t.Keys, []string{l.Label, l.Op, strconv.FormatInt(l.Calls, 10), strconv.FormatInt(l.Dist.P50, 10),
			strconv.FormatInt(l.Dist.Max, 10), strconv.FormatInt(l.WaitNS, 10), lastKey})
	}
	t.Sorted, t.SortedBy, t.SortedDesc = true, 5, true // as analyze sorts them
	if len(names) > 0 && slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "…") }) {
		t.Note = "Long names are shortened to their last parts; the chart's tooltip and the JSON (skew.by_label) give them whole."
	}
	return t
}

// shortLabelLen is the longest label a table cell shows whole.
const shortLabelLen = 56

// shortLabels shortens labels longer than shortLabelLen to their last
// path parts ("…/cond_4/HorovodAllreduce_grads_4_0"), keeping any label
// whole whose short form another label shares.
func shortLabels(ls []analyze.LabelSkew) []string {
	out := make([]string, len(ls))
	seen := map[string]int{}
	for i, l := range ls {
		out[i] = l.Label
		if len(l.Label) > shortLabelLen {
			parts := strings.Split(l.Label, "/")
			short := parts[len(parts)-1]
			for k := len(parts) - 2; k >= 0 && len(short)+len(parts[k])+1 <= shortLabelLen; k-- {
				short = parts[k] + "/" + short
			}
			if short != l.Label {
				out[i] = "…/" + short
			}
		}
		seen[out[i]]++
	}
	for i, l := range ls {
		if seen[out[i]] > 1 {
			out[i] = l.Label
		}
	}
	return out
}

// waitingSeriesRanks is how many last ranks the chart gives a colour of
// their own; the others share one.
const waitingSeriesRanks = 8

// waitingChart draws every labelled call's skew against when it began,
// one colour per rank that came last.
func waitingChart(s *analyze.Summary, what string) (chartSpec, bool) {
	ser := s.Skew.LabelSeries
	if len(ser.AtNS) == 0 {
		return chartSpec{}, false
	}
	count := map[int]int{}
	for _, r := range ser.Last {
		count[r]++
	}
	var ranks []int
	for r := range count {
		ranks = append(ranks, r)
	}
	slices.SortFunc(ranks, func(a, b int) int {
		if count[a] != count[b] {
			return count[b] - count[a]
		}
		return a - b
	})
	own := map[int]bool{}
	for i, r := range ranks {
		own[r] = i < waitingSeriesRanks
	}
	var labels []string
	labelIdx := map[string]int{}
	points := map[string][]opts.ScatterData{}
	name := func(r int) string {
		if own[r] {
			return "rank " + strconv.Itoa(r)
		}
		return "another rank"
	}
	for i, at := range ser.AtNS {
		li, ok := labelIdx[ser.Label[i]]
		if !ok {
			li = len(labels)
			labelIdx[ser.Label[i]] = li
			labels = append(labels, ser.Label[i])
		}
		n := name(ser.Last[i])
		points[n] = append(points[n], opts.ScatterData{Value: []interface{}{at - s.Run.FirstNS, ser.SkewNS[i], li}, SymbolSize: 8})
	}
	sc := charts.NewScatter()
	sc.SetGlobalOptions(noAnimation(), tooltipItem(), legendTop(), grid(),
		charts.WithXAxisOpts(opts.XAxis{Type: "value", Name: "time since the run began"}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "skew"}))
	var order []string
	for _, r := range ranks {
		if n := name(r); !slices.Contains(order, n) {
			order = append(order, n)
		}
	}
	for _, n := range order {
		sc.AddSeries(n, points[n])
	}
	v := variant("skew", "ns", "waiting", sc)
	v.Labels = labels
	note := fmt.Sprintf("each point is one %s's call: when its first rank arrived, how much later the last one did, coloured by that last rank", what)
	var calls int64
	for _, l := range s.Skew.ByLabel {
		calls += l.Calls
	}
	if int64(len(ser.AtNS)) < calls {
		note += fmt.Sprintf(" (%d of the calls, evenly sampled)", len(ser.AtNS))
	}
	return chartSpec{ID: "chart-waiting", Title: "Skew over time, by the rank that came last", Height: 340, Note: note,
		Variants: []chartVariant{v}}, true
}
