package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"sort"
	"strconv"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/units"
)

// chartSpec is one chart of a page: go-echarts builds its options, the
// page embeds them as JSON and report.js draws them. A chart with several
// variants (the matrix by metric and op) gets a selector.
type chartSpec struct {
	ID       string
	Title    string
	Note     string // one line under the title
	Height   int    // px
	Variants []chartVariant
}

type chartVariant struct {
	Label string `json:"label"`
	// Format names how values print in tooltips and the value axis:
	// ns, bytes, gbps, count, pct.
	Format string `json:"format"`
	// Tooltip selects report.js's tooltip for the chart: "axis" (default),
	// "matrix", "skew", "opsize", "graph".
	Tooltip string          `json:"tooltip,omitempty"`
	Labels  []string        `json:"labels,omitempty"` // category names the tooltip needs (ops, buckets)
	Option  json.RawMessage `json:"option"`
}

// SpecJSON is the chart's variants as JSON for a <script type="application/json">.
func (c chartSpec) SpecJSON() template.JS {
	b, err := json.Marshal(c.Variants)
	if err != nil {
		panic(err) // options are built from plain values
	}
	return template.JS(b)
}

// optionOf renders a go-echarts chart's options as JSON.
type validator interface {
	Validate()
	JSON() map[string]interface{}
}

func optionOf(c validator) json.RawMessage {
	c.Validate()
	b, err := json.Marshal(c.JSON())
	if err != nil {
		panic(err)
	}
	return b
}

func variant(label, format, tooltip string, c validator) chartVariant {
	return chartVariant{Label: label, Format: format, Tooltip: tooltip, Option: optionOf(c)}
}

func tooltipAxis() charts.GlobalOpts {
	return charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "axis"})
}

func tooltipItem() charts.GlobalOpts {
	return charts.WithTooltipOpts(opts.Tooltip{Show: opts.Bool(true), Trigger: "item"})
}

func legendTop() charts.GlobalOpts {
	return charts.WithLegendOpts(opts.Legend{Show: opts.Bool(true), Top: "0", Type: "scroll"})
}

func grid() charts.GlobalOpts {
	return charts.WithGridOpts(opts.Grid{Left: "3%", Right: "4%", Top: "40", Bottom: "40", ContainLabel: opts.Bool(true)})
}

func noAnimation() charts.GlobalOpts { return charts.WithAnimation(false) }

// Colours of the time categories, the same in every chart.
const (
	colCompute    = "#4e79a7"
	colOverlapped = "#76b7b2"
	colExposed    = "#e15759"
	colWait       = "#f28e2b"
	colIdle       = "#bab0ac"
)

func stackedBar(x []string, xName string, series []barSeries) *charts.Bar {
	b := charts.NewBar()
	b.SetGlobalOptions(noAnimation(), tooltipAxis(), legendTop(), grid(),
		charts.WithXAxisOpts(opts.XAxis{Name: xName, Type: "category"}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value"}))
	if len(x) > 60 {
		b.SetGlobalOptions(charts.WithDataZoomOpts(opts.DataZoom{Type: "slider", Start: 0, End: 100}, opts.DataZoom{Type: "inside"}))
	}
	b.SetXAxis(x)
	for _, s := range series {
		data := make([]opts.BarData, len(s.values))
		for i, v := range s.values {
			data[i] = opts.BarData{Value: round(v)}
		}
		b.AddSeries(s.name, data, charts.WithBarChartOpts(opts.BarChart{Stack: s.stack}),
			charts.WithItemStyleOpts(opts.ItemStyle{Color: s.color}))
	}
	return b
}

type barSeries struct {
	name, stack, color string
	values             []float64
}

func round(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	if math.Abs(v) >= 100 {
		return math.Round(v)
	}
	return math.Round(v*1000) / 1000
}

// rankChart: per-rank stacked time, the wait drawn out of the exposed part.
func rankChart(s *analyze.Summary) chartSpec {
	if len(s.Ranks) > manyRanks {
		return rankBandChart(s)
	}
	var x []string
	var pick []int
	for i, r := range s.Ranks {
		x = append(x, strconv.Itoa(r.Rank))
		pick = append(pick, i)
	}
	b := stackedBar(x, "rank", rankTimeSeries(s, pick))
	return chartSpec{ID: "chart-ranks", Title: "Where each rank's time goes", Height: 320,
		Note:     "compute alone, communication hidden behind compute, communication not hidden, and the part of it spent waiting for the last rank to arrive",
		Variants: []chartVariant{variant("time", "ns", "", b)}}
}

// rankTimeSeries splits the time of the ranks s.Ranks[pick] into the
// bars of rankChart: compute alone, communication hidden behind compute,
// communication not hidden, and the part of it spent waiting for the last
// rank (drawn out of the exposed part).
func rankTimeSeries(s *analyze.Summary, pick []int) []barSeries {
	var comp, ov, exp, wait []float64
	for _, i := range pick {
		r := s.Ranks[i]
		comp = append(comp, float64(r.ComputeNS-r.OverlappedNS))
		ov = append(ov, float64(r.OverlappedNS))
		w := math.Min(float64(r.WaitNS), float64(r.ExposedNS))
		exp = append(exp, float64(r.ExposedNS)-w)
		wait = append(wait, w)
	}
	series := []barSeries{
		{"compute only", "t", colCompute, comp}, {"overlapped comm", "t", colOverlapped, ov},
		{"exposed comm", "t", colExposed, exp}, {"waiting for the last rank", "t", colWait, wait}}
	if s.IsUnknown("compute") {
		series = series[1:] // the source has none: not a bar of 0
	}
	return series
}

// stepChart: the per-step breakdown over the run.
func stepChart(s *analyze.Summary) (chartSpec, bool) {
	if len(s.Steps) == 0 {
		return chartSpec{}, false
	}
	var x []string
	var comp, ov, exp, idle []float64
	for _, st := range s.Steps {
		x = append(x, strconv.Itoa(st.Step))
		comp = append(comp, st.ComputeNS-st.OverlappedNS)
		ov = append(ov, st.OverlappedNS)
		exp = append(exp, st.ExposedNS)
		idle = append(idle, st.IdleNS)
	}
	b := stackedBar(x, "step", []barSeries{
		{"compute only", "t", colCompute, comp}, {"overlapped comm", "t", colOverlapped, ov},
		{"exposed comm", "t", colExposed, exp}, {"idle", "t", colIdle, idle}})
	return chartSpec{ID: "chart-steps", Title: "Every step, mean over ranks", Height: 320,
		Note:     "the step's time split into compute alone, communication hidden behind compute, exposed communication and idle",
		Variants: []chartVariant{variant("time", "ns", "", b)}}, true
}

func rankLabels(n int) []string {
	l := make([]string, n)
	for i := range l {
		l[i] = strconv.Itoa(i)
	}
	return l
}

func heatmap(x, y []string, xName, yName string, cells []opts.HeatMapData, maxV float64, colors []string) *charts.HeatMap {
	h := charts.NewHeatMap()
	if maxV <= 0 {
		maxV = 1
	}
	h.SetGlobalOptions(noAnimation(), tooltipItem(), charts.WithLegendOpts(opts.Legend{Show: opts.Bool(false)}),
		charts.WithGridOpts(opts.Grid{Left: "3%", Right: "90", Top: "20", Bottom: "40", ContainLabel: opts.Bool(true)}),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Data: x, Name: xName, SplitArea: &opts.SplitArea{Show: opts.Bool(true)}}),
		charts.WithYAxisOpts(opts.YAxis{Type: "category", Data: y, Name: yName, SplitArea: &opts.SplitArea{Show: opts.Bool(true)}}),
		charts.WithVisualMapOpts(opts.VisualMap{Calculable: opts.Bool(true), Min: 0, Max: float32(maxV), Orient: "vertical", Right: "0", Top: "center",
			InRange: &opts.VisualMapInRange{Color: colors}}))
	h.AddSeries("value", cells)
	return h
}

var blues = []string{"#f7fbff", "#c6dbef", "#6baed6", "#2171b5", "#08306b"}
var reds = []string{"#fff5f0", "#fcbba1", "#fb6a4a", "#cb181d", "#67000d"}
var diverging = []string{"#2166ac", "#92c5de", "#f7f7f7", "#f4a582", "#b2182b"}

func matrixVariant(label, format string, m [][]int64) chartVariant {
	f := make([][]float64, len(m))
	for i, row := range m {
		f[i] = make([]float64, len(row))
		for j, v := range row {
			f[i][j] = float64(v)
		}
	}
	return matrixVariantF(label, format, f, false)
}

// matrixVariantF draws a float matrix; skipZero leaves out cells with no
// value (an edge with no traffic has no bandwidth).
func matrixVariantF(label, format string, m [][]float64, skipZero bool) chartVariant {
	n := len(m)
	var cells []opts.HeatMapData
	var maxV float64
	for src := range m {
		for dst, v := range m[src] {
			if skipZero && v == 0 {
				continue
			}
			cells = append(cells, opts.HeatMapData{Value: [3]interface{}{dst, src, v}})
			maxV = math.Max(maxV, v)
		}
	}
	h := heatmap(rankLabels(n), rankLabels(n), "receiver", "sender", cells, maxV, blues)
	return variant(label, format, "matrix", h)
}

// edgeBandwidth is each edge's bytes over its senders' time, GB/s.
func edgeBandwidth(m analyze.DenseMatrix) [][]float64 {
	out := make([][]float64, len(m.Bytes))
	for i := range m.Bytes {
		out[i] = make([]float64, len(m.Bytes[i]))
		for j := range m.Bytes[i] {
			if i < len(m.SendNS) && j < len(m.SendNS[i]) && m.SendNS[i][j] > 0 {
				out[i][j] = float64(m.Bytes[i][j]) / float64(m.SendNS[i][j])
			}
		}
	}
	return out
}

// matrixChart: rank x rank traffic, by metric and op.
func matrixChart(s *analyze.Summary) chartSpec {
	if s.Matrix.Ranks > manyRanks {
		return hostMatrixChart(s)
	}
	c := chartSpec{ID: "chart-matrix", Title: "Traffic between ranks", Height: 420,
		Note: "received messages by sender (rows) and receiver (columns); choose the measure and the op"}
	add := func(m analyze.Matrix) {
		name := "every op"
		if m.Op != "" {
			name = m.Op
			if m.Pattern != "" {
				name += " (" + m.Pattern + ")"
			}
		}
		d := m.Dense()
		c.Variants = append(c.Variants,
			matrixVariant("bytes, "+name, "bytes", d.Bytes),
			matrixVariant("messages, "+name, "count", d.Messages),
			matrixVariant("recv time, "+name, "ns", d.TimeNS),
			matrixVariantF("bandwidth (bytes / send time), "+name, "gbps", edgeBandwidth(d), true))
	}
	add(s.Matrix)
	for _, m := range s.OpMatrices {
		add(m)
	}
	return c
}

// skewChart: each rank's arrival after the first, per sampled call.
func skewChart(s *analyze.Summary) (chartSpec, bool) {
	ser := s.Skew.Series
	if len(ser.Seq) == 0 {
		return chartSpec{}, false
	}
	if len(ser.Offset[0]) > manyRanks {
		return skewBandChart(s)
	}
	var x []string
	var cells []opts.HeatMapData
	var maxV float64
	for i, row := range ser.Offset {
		x = append(x, strconv.FormatInt(ser.Seq[i], 10))
		for r, v := range row {
			if v < 0 {
				continue
			}
			cells = append(cells, opts.HeatMapData{Value: [3]interface{}{i, r, v}})
			maxV = math.Max(maxV, float64(v))
		}
	}
	h := heatmap(x, rankLabels(len(ser.Offset[0])), "collective (sequence number)", "rank", cells, maxV, reds)
	v := variant("arrival", "ns", "skew", h)
	v.Labels = make([]string, len(ser.Op)) // what the tooltip names a call by: its op, after its tensor if labelled
	for i, op := range ser.Op {
		v.Labels[i] = op
		if i < len(ser.Label) && ser.Label[i] != "" {
			v.Labels[i] = ser.Label[i] + " · " + op
		}
	}
	return chartSpec{ID: "chart-skew", Title: "Arrival skew: who is late, and when", Height: 300,
		Note:     fmt.Sprintf("each rank's arrival after the first, for %d of the run's world collectives (evenly sampled)", len(ser.Seq)),
		Variants: []chartVariant{v}}, true
}

// opSizeChart: collective time by op and size bucket.
func opSizeChart(s *analyze.Summary) (chartSpec, bool) {
	if len(s.Collectives) == 0 {
		return chartSpec{}, false
	}
	var ops []string
	lo, hi := 1<<30, -1
	for _, c := range s.Collectives {
		if len(ops) == 0 || ops[len(ops)-1] != c.Op {
			ops = append(ops, c.Op)
		}
		lo, hi = min(lo, c.Bucket), max(hi, c.Bucket)
	}
	var buckets []string
	for k := lo; k <= hi; k++ {
		buckets = append(buckets, units.Bucket(k))
	}
	sum := map[[2]int]int64{}
	for _, c := range s.Collectives {
		sum[[2]int{indexOf(ops, c.Op), c.Bucket - lo}] += c.Time.Sum
	}
	// Colour by log10 of the time (a fourth dimension), since one op and
	// size usually dwarfs the rest; the tooltip shows the time itself.
	var cells []opts.HeatMapData
	var maxV float64
	for k, v := range sum {
		lv := math.Log10(1 + float64(v))
		cells = append(cells, opts.HeatMapData{Value: [4]interface{}{k[1], k[0], v, round(lv)}})
		maxV = math.Max(maxV, lv)
	}
	sort.Slice(cells, func(i, j int) bool { return fmt.Sprint(cells[i].Value) < fmt.Sprint(cells[j].Value) })
	h := heatmap(buckets, ops, "size", "op", cells, maxV, blues)
	h.VisualMapList = nil
	h.SetGlobalOptions(charts.WithVisualMapOpts(opts.VisualMap{Min: 0, Max: float32(maxV), Dimension: "3", Orient: "vertical",
		Right: "0", Top: "center", Text: []string{"more", "less (log scale)"}, InRange: &opts.VisualMapInRange{Color: blues}}))
	v := variant("time", "ns", "opsize", h)
	return chartSpec{ID: "chart-opsize", Title: "Collective time by op and size", Height: max(230, 100+40*len(ops)),
		Note: "total time over every rank's events", Variants: []chartVariant{v}}, true
}

func indexOf(l []string, s string) int {
	for i, x := range l {
		if x == s {
			return i
		}
	}
	return -1
}

// sizeChart: message-size histogram per op, and time by size.
func sizeChart(s *analyze.Summary) (chartSpec, bool) {
	if len(s.MessageSizes) == 0 {
		return chartSpec{}, false
	}
	lo, hi := 1<<30, -1
	var ops []string
	for _, m := range s.MessageSizes {
		lo, hi = min(lo, m.Bucket), max(hi, m.Bucket)
		if indexOf(ops, m.Op) < 0 {
			ops = append(ops, m.Op)
		}
	}
	var x []string
	for k := lo; k <= hi; k++ {
		x = append(x, units.Bucket(k))
	}
	build := func(val func(analyze.SizeStats) float64) *charts.Bar {
		var series []barSeries
		for _, op := range ops {
			v := make([]float64, len(x))
			for _, m := range s.MessageSizes {
				if m.Op == op {
					v[m.Bucket-lo] = val(m)
				}
			}
			series = append(series, barSeries{name: op, values: v})
		}
		return stackedBar(x, "message size", series)
	}
	return chartSpec{ID: "chart-sizes", Title: "Message sizes", Height: 320, Note: "received messages by log2 size, per op",
		Variants: []chartVariant{
			variant("messages", "count", "", build(func(m analyze.SizeStats) float64 { return float64(m.Messages) })),
			variant("time", "ns", "", build(func(m analyze.SizeStats) float64 { return float64(m.TimeNS) })),
			variant("bytes", "bytes", "", build(func(m analyze.SizeStats) float64 { return float64(m.Bytes) })),
		}}, true
}

// busbwChart: measured busbw by size with the fitted model's curves.
func busbwChart(s *analyze.Summary) (chartSpec, bool) {
	sc := charts.NewScatter()
	sc.SetGlobalOptions(noAnimation(), tooltipItem(), legendTop(), grid(),
		charts.WithXAxisOpts(opts.XAxis{Type: "log", Name: "bytes"}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "busbw GB/s"}))
	type key struct{ op, algo string }
	pts := map[key][]opts.ScatterData{}
	var keys []key
	var maxB int64
	for _, c := range s.Collectives {
		if c.Calls == 0 || c.Bytes == 0 || c.BusBWGBps == 0 {
			continue
		}
		k := key{c.Op, c.Algo}
		if _, ok := pts[k]; !ok {
			keys = append(keys, k)
		}
		mean := c.Bytes / c.Calls
		maxB = max(maxB, mean)
		pts[k] = append(pts[k], opts.ScatterData{Value: []interface{}{mean, round(c.BusBWGBps)}, SymbolSize: 10})
	}
	if len(keys) == 0 {
		return chartSpec{}, false
	}
	for _, k := range keys {
		sc.AddSeries(k.op+" "+k.algo+" (measured)", pts[k])
	}
	// The model's busbw for allreduce at the run's rank count, only where
	// the model section says there is a model (an unusable fit is not
	// shown anywhere).
	p := s.Run.WorldSize
	note := "measured busbw of each op, algorithm and size"
	if p >= 2 && s.Fit.Usable && (s.Fit.AlphaNS > 0 || s.Fit.BetaNSPerB > 0) {
		note += fmt.Sprintf("; dashed: the alpha-beta-gamma model for allreduce on %d ranks (link %s)", p, units.GBps(s.Fit.LinkGBps))
		line := charts.NewLine()
		for _, algo := range analyze.AllreduceAlgos {
			var data []opts.LineData
			for _, pt := range s.Fit.BusBWCurve("allreduce", algo, p, maxB*2) {
				data = append(data, opts.LineData{Value: []interface{}{pt.Bytes, round(pt.GBps)}, Symbol: "none"})
			}
			line.AddSeries("allreduce "+algo+" (model)", data, charts.WithLineChartOpts(opts.LineChart{Smooth: opts.Bool(false)}),
				charts.WithLineStyleOpts(opts.LineStyle{Type: "dashed", Width: 1.5}))
		}
		sc.Overlap(line)
	}
	return chartSpec{ID: "chart-busbw", Title: "Bus bandwidth against size", Height: 360,
		Note:     note,
		Variants: []chartVariant{variant("busbw", "gbps", "busbw", sc)}}, true
}

// projectionChart: allreduce time per step at more ranks, per algorithm.
func projectionChart(s *analyze.Summary) (chartSpec, bool) {
	pr := s.Projection
	if pr == nil || len(pr.Ranks) < 2 {
		return chartSpec{}, false
	}
	l := charts.NewLine()
	l.SetGlobalOptions(noAnimation(), tooltipAxis(), legendTop(), grid(),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "ranks"}),
		charts.WithYAxisOpts(opts.YAxis{Type: "log", Name: "per " + pr.Basis}))
	var x []string
	for _, r := range pr.Ranks {
		x = append(x, strconv.Itoa(r))
	}
	l.SetXAxis(x)
	for i, a := range pr.Algos {
		var data []opts.LineData
		for j := range pr.Ranks {
			data = append(data, opts.LineData{Value: round(math.Max(pr.TimeNS[i][j], 1))})
		}
		l.AddSeries(a, data)
	}
	return chartSpec{ID: "chart-projection", Title: "Allreduce time at more ranks (model)", Height: 320,
		Note: fmt.Sprintf("this run's allreduces per %s, projected with the fitted model; at its own %d ranks the model gives %s against %s measured",
			pr.Basis, pr.Current, units.Duration(pr.Modeled), units.Duration(pr.Measured)),
		Variants: []chartVariant{variant("time", "ns", "", l)}}, true
}

// patternCharts: one small graph per op and algorithm.
func patternCharts(s *analyze.Summary) []chartSpec {
	var out []chartSpec
	for i, p := range s.Patterns {
		if i >= 12 {
			break
		}
		g := charts.NewGraph()
		g.SetGlobalOptions(noAnimation(), tooltipItem(), charts.WithLegendOpts(opts.Legend{Show: opts.Bool(false)}))
		var nodes []opts.GraphNode
		seen := map[int]bool{}
		for _, e := range p.Edges {
			seen[e[0]], seen[e[1]] = true, true
		}
		var rs []int
		for r := range seen {
			rs = append(rs, r)
		}
		sort.Ints(rs)
		for _, r := range rs {
			nodes = append(nodes, opts.GraphNode{Name: strconv.Itoa(r), SymbolSize: 26})
		}
		var links []opts.GraphLink
		for _, e := range p.Edges {
			links = append(links, opts.GraphLink{Source: strconv.Itoa(e[0]), Target: strconv.Itoa(e[1])})
		}
		g.AddSeries(p.Op, nodes, links, charts.WithGraphChartOpts(opts.GraphChart{Layout: "circular", Roam: opts.Bool(false),
			EdgeSymbol: []string{"none", "arrow"}, EdgeSymbolSize: 7}),
			charts.WithLabelOpts(opts.Label{Show: opts.Bool(true), Position: "inside", Formatter: "{b}", Color: "#fff"}),
			charts.WithLineStyleOpts(opts.LineStyle{Curveness: 0.15, Width: 1.2}))
		out = append(out, chartSpec{ID: fmt.Sprintf("chart-pattern-%d", i), Title: fmt.Sprintf("%s · %s · %s", p.Op, p.Algo, p.Pattern), Height: 220,
			Note:     fmt.Sprintf("communicator %s, %d ranks; %d of %d sampled calls have this shape", p.Comm, p.Ranks, p.Agree, p.Sampled),
			Variants: []chartVariant{variant("messages", "count", "graph", g)}})
	}
	return out
}
