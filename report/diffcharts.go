package report

import (
	"fmt"
	"math"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/units"
)

func perStep(s *analyze.Summary) float64 {
	if s.StepSummary.Steps > 0 {
		return float64(s.StepSummary.Steps)
	}
	return 1
}

func diffSections(a, b *analyze.Summary, d *analyze.Diff) []section {
	var time []chartSpec
	time = append(time, diffStepChart(a, b, d))
	if c, ok := diffStepSeries(a, b); ok {
		time = append(time, c)
	}
	secs := []section{{ID: "time", Title: "Where the time goes, A and B", Charts: time}}
	secs = append(secs, section{ID: "traffic", Title: "Traffic", Charts: []chartSpec{diffSizeChart(a, b, d), diffMatrixChart(a, b, d)}})
	secs = append(secs, section{ID: "network", Title: "Bandwidth", Charts: []chartSpec{diffBusbwChart(a, b)}})
	// The per-step (or per-run) changes, then the per-epoch ones apart.
	tables := DiffTables(d, 0, false)
	tables[0].Title = "Per " + d.Basis
	if len(tables) > 1 {
		tables[1].Title = "Per epoch"
		tables[1].Note = "Ops and collective sizes called less than once every other step in both runs: the first broadcast, an epoch's evaluation."
	}
	secs = append(secs, section{ID: "changes", Title: "Every change", Tables: tables,
		Intro: "Those that move the time per sample most first, then the rest by how much they changed, weighted by their share of the run; better and worse follow each figure's direction (lower times, higher bandwidth and accuracy) and are given only to changes larger than the two runs' own variation: the 95% interval leaves out 0 and the change is over the floor; the others are within noise."})
	return secs
}

// diffStepChart: the mean step (or run) of A and B as stacked bars.
func diffStepChart(a, b *analyze.Summary, d *analyze.Diff) chartSpec {
	x := []string{"A", "B"}
	val := func(f func(*analyze.Summary) float64) []float64 { return []float64{f(a), f(b)} }
	var series []barSeries
	if d.Basis == "step" {
		series = []barSeries{
			{"compute only", "t", colCompute, val(func(s *analyze.Summary) float64 { return s.StepSummary.ComputeNS - s.StepSummary.OverlappedNS })},
			{"overlapped comm", "t", colOverlapped, val(func(s *analyze.Summary) float64 { return s.StepSummary.OverlappedNS })},
			{"exposed comm", "t", colExposed, val(func(s *analyze.Summary) float64 { return s.StepSummary.ExposedNS })},
			{"idle", "t", colIdle, val(func(s *analyze.Summary) float64 { return s.StepSummary.IdleNS })}}
	} else {
		mean := func(s *analyze.Summary, f func(analyze.RankStats) int64) float64 {
			var t float64
			for _, r := range s.Ranks {
				t += float64(f(r))
			}
			return t / math.Max(1, float64(len(s.Ranks)))
		}
		series = []barSeries{
			{"compute only", "t", colCompute, val(func(s *analyze.Summary) float64 {
				return mean(s, func(r analyze.RankStats) int64 { return r.ComputeNS - r.OverlappedNS })
			})},
			{"overlapped comm", "t", colOverlapped, val(func(s *analyze.Summary) float64 {
				return mean(s, func(r analyze.RankStats) int64 { return r.OverlappedNS })
			})},
			{"exposed comm", "t", colExposed, val(func(s *analyze.Summary) float64 {
				return mean(s, func(r analyze.RankStats) int64 { return r.ExposedNS })
			})}}
	}
	bar := stackedBar(x, "run", series)
	c := chartSpec{ID: "chart-diff-step", Title: "The mean " + d.Basis + " of A and B", Height: 300,
		Note:     "compute alone, communication hidden behind compute, exposed communication and idle, mean over ranks",
		Variants: []chartVariant{variant("stacked", "ns", "", bar)}}
	// Stacked on one linear axis, a run many times shorter than the
	// other is a bar too thin to see (5 ms beside 172 ms): then the parts
	// side by side on a log axis come first.
	var total [2]float64
	for _, s := range series {
		total[0] += s.values[0]
		total[1] += s.values[1]
	}
	if lo, hi := min(total[0], total[1]), max(total[0], total[1]); hi > 0 && (lo <= 0 || hi/lo >= stepRatioForLog) {
		c.Note = "each part of the mean " + d.Basis + " of A and B side by side, on a log scale (A's and B's differ " + ratioText(lo, hi) +
			"); the stacked view is in the selector"
		c.Variants = append([]chartVariant{variant("side by side, log scale", "ns", "", partsBar(d.Basis, total, series))}, c.Variants...)
	}
	return c
}

// stepRatioForLog is the ratio of two runs' mean steps beyond which the
// step chart is drawn on a log scale: at 5x the shorter bar is a fifth of
// the other's height, and its parts thinner still.
const stepRatioForLog = 5

func ratioText(lo, hi float64) string {
	if lo <= 0 {
		return "by all of one of them"
	}
	return fmt.Sprintf("%.0fx", hi/lo)
}

// partsBar: the total and each part of A's and B's mean step as bars
// side by side, on a log axis (a part that is zero is left out: a log
// axis has no 0).
func partsBar(basis string, total [2]float64, series []barSeries) *charts.Bar {
	x := []string{basis}
	vals := [2][]float64{{total[0]}, {total[1]}}
	for _, s := range series {
		x = append(x, s.name)
		vals[0] = append(vals[0], s.values[0])
		vals[1] = append(vals[1], s.values[1])
	}
	b := charts.NewBar()
	b.SetGlobalOptions(noAnimation(), tooltipAxis(), legendTop(), grid(),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", AxisLabel: &opts.AxisLabel{Interval: "0"}}),
		charts.WithYAxisOpts(opts.YAxis{Type: "log", Name: "time (log scale)"}))
	b.SetXAxis(x)
	for i, r := range []struct{ name, color string }{{"A", "#4e79a7"}, {"B", "#f28e2b"}} {
		data := make([]opts.BarData, len(vals[i]))
		for j, v := range vals[i] {
			if v > 0 {
				data[j] = opts.BarData{Value: round(v)}
			} else {
				data[j] = opts.BarData{Value: "-"}
			}
		}
		b.AddSeries(r.name, data, charts.WithItemStyleOpts(opts.ItemStyle{Color: r.color}))
	}
	return b
}

// diffStepSeries: each step's time and exposed communication over the
// run, both runs on one axis of samples processed (per sample, when both
// name their batch), so runs of different batch sizes line up.
func diffStepSeries(a, b *analyze.Summary) (chartSpec, bool) {
	if len(a.Steps) == 0 || len(b.Steps) == 0 {
		return chartSpec{}, false
	}
	perSample := a.Run.SamplesPerStep > 0 && b.Run.SamplesPerStep > 0
	xName, note := "fraction of the run's steps", "each step's time and exposed communication (mean over ranks), against the fraction of the run's steps done"
	if perSample {
		xName, note = "samples processed", "each step's time and exposed communication per sample (mean over ranks), against the samples processed by the step's end"
	}
	l := charts.NewLine()
	l.SetGlobalOptions(noAnimation(), tooltipAxis(), legendTop(), grid(),
		charts.WithXAxisOpts(opts.XAxis{Type: "value", Name: xName}), charts.WithYAxisOpts(opts.YAxis{Type: "value"}))
	for _, r := range []struct {
		name    string
		s       *analyze.Summary
		exposed bool
	}{{"A step", a, false}, {"B step", b, false}, {"A exposed comm", a, true}, {"B exposed comm", b, true}} {
		n := float64(r.s.Run.SamplesPerStep)
		data := make([]opts.LineData, len(r.s.Steps))
		for i, st := range r.s.Steps {
			v := st.TimeNS
			if r.exposed {
				v = st.ExposedNS
			}
			x := float64(i+1) / float64(len(r.s.Steps))
			if perSample {
				x, v = float64(i+1)*n, v/n
			}
			data[i] = opts.LineData{Value: []interface{}{round(x), round(v)}, Symbol: "none"}
		}
		l.AddSeries(r.name, data)
	}
	title := "Step by step"
	if perSample {
		title = "Time per sample, step by step"
	}
	return chartSpec{ID: "chart-diff-steps", Title: title, Height: 300, Note: note,
		Variants: []chartVariant{variant("time", "ns", "", l)}}, true
}

// diffSizeChart: both runs' message-size histograms, per step.
func diffSizeChart(a, b *analyze.Summary, d *analyze.Diff) chartSpec {
	lo, hi := 1<<30, -1
	for _, s := range []*analyze.Summary{a, b} {
		for _, m := range s.MessageSizes {
			lo, hi = min(lo, m.Bucket), max(hi, m.Bucket)
		}
	}
	if hi < lo {
		lo, hi = 0, 0
	}
	var x []string
	for k := lo; k <= hi; k++ {
		x = append(x, units.Bucket(k))
	}
	build := func(val func(analyze.SizeStats) float64) *charts.Bar {
		var series []barSeries
		for _, r := range []struct {
			name, color string
			s           *analyze.Summary
		}{{"A", "#4e79a7", a}, {"B", "#f28e2b", b}} {
			v := make([]float64, len(x))
			for _, m := range r.s.MessageSizes {
				v[m.Bucket-lo] += val(m) / perStep(r.s)
			}
			series = append(series, barSeries{name: r.name, color: r.color, values: v})
		}
		return stackedBar(x, "message size", series)
	}
	return chartSpec{ID: "chart-diff-sizes", Title: "Message sizes, A and B", Height: 320, Note: "received messages by log2 size, per " + d.Basis,
		Variants: []chartVariant{
			variant("messages", "count", "", build(func(m analyze.SizeStats) float64 { return float64(m.Messages) })),
			variant("time", "ns", "", build(func(m analyze.SizeStats) float64 { return float64(m.TimeNS) })),
			variant("bytes", "bytes", "", build(func(m analyze.SizeStats) float64 { return float64(m.Bytes) })),
		}}
}

// diffMatrixChart: B - A bytes per step when the runs have the same ranks,
// else each run's matrix.
func diffMatrixChart(a, b *analyze.Summary, d *analyze.Diff) chartSpec {
	if max(a.Matrix.Ranks, b.Matrix.Ranks) > manyRanks {
		return diffHostMatrixChart(a, b, d)
	}
	c := chartSpec{ID: "chart-diff-matrix", Title: "Traffic between ranks", Height: 420}
	da, db := a.Matrix.Dense(), b.Matrix.Dense()
	if a.Matrix.Ranks == b.Matrix.Ranks && a.Matrix.Ranks > 0 {
		n := a.Matrix.Ranks
		var cells []opts.HeatMapData
		var m float64
		for i := range n {
			for j := range n {
				v := float64(db.Bytes[i][j])/perStep(b) - float64(da.Bytes[i][j])/perStep(a)
				cells = append(cells, opts.HeatMapData{Value: [3]interface{}{j, i, math.Round(v)}})
				m = math.Max(m, math.Abs(v))
			}
		}
		h := heatmap(rankLabels(n), rankLabels(n), "receiver", "sender", cells, m, diverging)
		h.VisualMapList = nil
		h.SetGlobalOptions(charts.WithVisualMapOpts(opts.VisualMap{Calculable: opts.Bool(true), Min: float32(-math.Max(m, 1)), Max: float32(math.Max(m, 1)),
			Orient: "vertical", Right: "0", Top: "center", InRange: &opts.VisualMapInRange{Color: diverging}}))
		c.Note = "bytes per " + d.Basis + " from each sender (rows) to each receiver (columns): B minus A; red where B moves more"
		c.Variants = append(c.Variants, variant("B − A bytes", "bytes", "matrix", h))
	} else {
		c.Note = "the runs have different rank counts: each run's bytes per " + d.Basis
	}
	for _, r := range []struct {
		name string
		s    *analyze.Summary
		d    analyze.DenseMatrix
	}{{"A", a, da}, {"B", b, db}} {
		m := make([][]int64, len(r.d.Bytes))
		for i, row := range r.d.Bytes {
			m[i] = make([]int64, len(row))
			for j, v := range row {
				m[i][j] = int64(float64(v) / perStep(r.s))
			}
		}
		c.Variants = append(c.Variants, matrixVariant(r.name+" bytes", "bytes", m))
	}
	return c
}

// diffBusbwChart: both runs' measured busbw by size.
func diffBusbwChart(a, b *analyze.Summary) chartSpec {
	sc := charts.NewScatter()
	sc.SetGlobalOptions(noAnimation(), tooltipItem(), legendTop(), grid(),
		charts.WithXAxisOpts(opts.XAxis{Type: "log", Name: "bytes"}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "busbw GB/s"}))
	for _, r := range []struct {
		name, symbol string
		s            *analyze.Summary
	}{{"A", "circle", a}, {"B", "diamond", b}} {
		byKey := map[string][]opts.ScatterData{}
		var keys []string
		for _, c := range r.s.Collectives {
			if c.Calls == 0 || c.Bytes == 0 || c.BusBWGBps == 0 {
				continue
			}
			k := r.name + ": " + c.Op + " " + c.Algo
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], opts.ScatterData{Value: []interface{}{c.Bytes / c.Calls, round(c.BusBWGBps)}, Symbol: r.symbol, SymbolSize: 10})
		}
		for _, k := range keys {
			sc.AddSeries(k, byKey[k])
		}
	}
	return chartSpec{ID: "chart-diff-busbw", Title: "Bus bandwidth against size, A and B", Height: 360,
		Note:     "measured busbw of each op, algorithm and size bucket (A circles, B diamonds)",
		Variants: []chartVariant{variant("busbw", "gbps", "busbw", sc)}}
}
