package report

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/units"
)

// WriteSweepHTML writes the self-contained HTML page of a sweep: how
// accuracy, time to accuracy, throughput and communication change with the
// batch size, the learning-rate rule and the rank count.
func WriteSweepHTML(w io.Writer, sw *analyze.Sweep) error {
	p := &page{Kind: "sweep", Title: "Sweep: " + sweepShape(sw), Subtitle: sweepSubtitle(sw)}
	assets(p)
	p.Cards = sweepCards(sw)
	p.Findings = sw.Findings
	if sw.Noise != "" {
		p.Findings = append([]string{sw.Noise}, sw.Findings...)
	}
	for _, c := range sw.Configs {
		if c.Failed > 0 {
			p.Problems = append(p.Problems, fmt.Sprintf("%s: %d of %d runs did not complete (%s)", sweepName(c), c.Failed, len(c.Runs), strings.Join(runNames(c.Runs), ", ")))
		}
	}
	var err error
	if p.SummaryJS, err = jsonJS(sw); err != nil {
		return err
	}
	if len(sw.Configs) > 0 {
		p.Sections = sweepSections(sw)
	}
	return render(w, p)
}

// distinct is the sorted distinct values of f over the sweep.
func distinct[T int | string](sw *analyze.Sweep, f func(analyze.SweepConfig) T) []T {
	var out []T
	for _, c := range sw.Configs {
		if v := f(c); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

func sweepName(c analyze.SweepConfig) string {
	s := fmt.Sprintf("%s × batch %d, lr %s", plural(c.Ranks, "rank"), c.BatchSize, c.LRScaling)
	if c.Warmup != "" && c.Warmup != "0" {
		s += ", warm-up " + c.Warmup
	}
	return s
}

func runNames(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		out = append(out, filepath.Base(d))
	}
	return out
}

func sweepShape(sw *analyze.Sweep) string {
	g := distinct(sw, func(c analyze.SweepConfig) int { return c.GlobalBatch })
	if len(g) == 0 {
		return "no runs yet"
	}
	s := fmt.Sprintf("global batch %d", g[0])
	if len(g) > 1 {
		s = fmt.Sprintf("global batch %d → %d", g[0], g[len(g)-1])
	}
	if r := distinct(sw, func(c analyze.SweepConfig) string { return c.LRScaling }); len(r) > 1 {
		s += ", lr " + strings.Join(sortRules(r), " / ")
	}
	if n := distinct(sw, func(c analyze.SweepConfig) int { return c.Ranks }); len(n) > 1 {
		s += fmt.Sprintf(", %d → %d ranks", n[0], n[len(n)-1])
	}
	return s
}

func sortRules(r []string) []string {
	order := map[string]int{"none": 0, "sqrt": 1, "linear": 2}
	slices.SortFunc(r, func(a, b string) int { return order[a] - order[b] })
	return r
}

func sweepSubtitle(sw *analyze.Sweep) string {
	runs := 0
	for _, c := range sw.Configs {
		runs += len(c.Runs)
	}
	parts := []string{fmt.Sprintf("%d configurations, %d runs", len(sw.Configs), runs),
		fmt.Sprintf("target test accuracy %s", units.Percent(sw.Target, 1))}
	if b := distinct(sw, func(c analyze.SweepConfig) int { return c.BatchSize }); len(b) > 0 {
		parts = append(parts, fmt.Sprintf("batch %d–%d per rank", b[0], b[len(b)-1]))
	}
	if w := distinct(sw, func(c analyze.SweepConfig) string { return c.Warmup }); len(w) > 1 {
		parts = append(parts, "warm-up "+strings.Join(w, ", ")+" epochs")
	}
	if sw.Model != "" {
		parts = append(parts, fmt.Sprintf("projected to %d ranks with %s", sw.ProjectRanks, sw.Model))
	}
	return strings.Join(parts, " · ")
}

// sweepCards are the configurations the sweep's analysis picked: the
// best accuracy, the fastest to the target, the highest throughput, and
// what the largest batch lost without a learning-rate rule.
func sweepCards(sw *analyze.Sweep) []card {
	var cs []card
	at := func(i *int) (analyze.SweepConfig, bool) {
		if i == nil || *i < 0 || *i >= len(sw.Configs) {
			return analyze.SweepConfig{}, false
		}
		return sw.Configs[*i], true
	}
	if c, ok := at(sw.BestAccuracy); ok {
		cs = append(cs, card{Label: "best test accuracy", Value: units.Percent(c.Accuracy.Median, 2), Detail: sweepName(c), Def: "accuracy"})
	}
	if c, ok := at(sw.FastestToTarget); ok {
		cs = append(cs, card{Label: fmt.Sprintf("fastest to %s", units.Percent(sw.Target, 1)), Value: units.Duration(c.TimeToTargetNS.Median), Detail: sweepName(c), Def: "time-to-target"})
	} else if len(sw.Configs) > 0 {
		cs = append(cs, card{Label: fmt.Sprintf("fastest to %s", units.Percent(sw.Target, 1)), Value: "none reached it", Class: "bad", Def: "time-to-target"})
	}
	if c, ok := at(sw.HighestThroughput); ok {
		cs = append(cs, card{Label: "highest throughput", Value: fmt.Sprintf("%.0f/s", c.SamplesPerSec.Median), Detail: sweepName(c), Def: "throughput"})
	}
	if e := sw.NoRule; e != nil {
		lo, okl := at(&e.Smallest)
		hi, okh := at(&e.Largest)
		if okl && okh {
			c := card{Label: "largest batch, no lr rule", Value: fmt.Sprintf("%+.1f points", 100*e.AccuracyChange), Def: "accuracy",
				Detail: fmt.Sprintf("%s at global batch %d against %s at %d", units.Percent(hi.Accuracy.Mean, 2), hi.GlobalBatch, units.Percent(lo.Accuracy.Mean, 2), lo.GlobalBatch),
				Class:  verdictClass(e.Verdict)}
			cs = append(cs, c)
		}
	}
	return cs
}

// verdictClass is a card's class for an analysis' verdict.
func verdictClass(v string) string {
	switch v {
	case "better":
		return "good"
	case "worse":
		return "bad"
	}
	return ""
}

// sweepGroups are the sweep's lines, in the order of their first
// configuration.
func sweepGroups(sw *analyze.Sweep) []string {
	var gs []string
	for _, c := range sw.Configs {
		if !slices.Contains(gs, c.Group) {
			gs = append(gs, c.Group)
		}
	}
	return gs
}

func sweepSections(sw *analyze.Sweep) []section {
	// line is one figure of every group against the global batch, on a
	// log2 axis so that each group's points join whatever batches it has.
	line := func(format string, val func(analyze.SweepConfig) (float64, bool)) *charts.Line {
		l := charts.NewLine()
		l.SetGlobalOptions(noAnimation(), tooltipItem(), legendTop(), grid(),
			charts.WithXAxisOpts(opts.XAxis{Type: "log", Name: "global batch"}), charts.WithYAxisOpts(opts.YAxis{Type: "value", Scale: opts.Bool(true)}))
		for _, g := range sweepGroups(sw) {
			var data []opts.LineData
			for _, c := range sw.Configs {
				if c.Group != g {
					continue
				}
				if v, ok := val(c); ok {
					data = append(data, opts.LineData{Value: []interface{}{c.GlobalBatch, round(v)}})
				}
			}
			slices.SortFunc(data, func(a, b opts.LineData) int {
				return a.Value.([]interface{})[0].(int) - b.Value.([]interface{})[0].(int)
			})
			l.AddSeries(g, data)
		}
		return l
	}
	acc := chartSpec{ID: "chart-sweep-accuracy", Title: "Test accuracy by global batch", Height: 340,
		Note: "after the last epoch, mean over repeats; one line per learning-rate rule",
		Variants: []chartVariant{variant("test accuracy", "pct", "", line("pct", func(c analyze.SweepConfig) (float64, bool) {
			return c.Accuracy.Mean, c.Accuracy.N > 0
		}))}}
	ttt := chartSpec{ID: "chart-sweep-ttt", Title: fmt.Sprintf("Time to %s test accuracy", units.Percent(sw.Target, 1)), Height: 340,
		Note: "from the run's start to the first epoch end at the target; a gap where no repeat reached it",
		Variants: []chartVariant{variant("time", "ns", "", line("ns", func(c analyze.SweepConfig) (float64, bool) {
			return c.TimeToTargetNS.Mean, c.Reached > 0
		}))}}
	speed := chartSpec{ID: "chart-sweep-speed", Title: "Throughput and time per epoch", Height: 340,
		Note: "samples per second over the steps; mean epoch time",
		Variants: []chartVariant{
			variant("samples/s", "count", "", line("count", func(c analyze.SweepConfig) (float64, bool) {
				return c.SamplesPerSec.Mean, c.SamplesPerSec.N > 0
			})),
			variant("time per epoch", "ns", "", line("ns", func(c analyze.SweepConfig) (float64, bool) { return c.EpochNS.Mean, c.EpochNS.N > 0 })),
		}}
	comm := chartSpec{ID: "chart-sweep-comm", Title: "Communication per sample", Height: 340,
		Note: "collective bytes and exposed communication per sample of the global batch, and the headline busbw",
		Variants: []chartVariant{
			variant("bytes per sample", "bytes", "", line("bytes", func(c analyze.SweepConfig) (float64, bool) {
				return c.CommBytesPerSample.Mean, c.CommBytesPerSample.N > 0
			})),
			variant("exposed per sample", "ns", "", line("ns", func(c analyze.SweepConfig) (float64, bool) {
				return c.ExposedNSPerSample.Mean, c.ExposedNSPerSample.N > 0
			})),
			variant("busbw", "gbps", "", line("gbps", func(c analyze.SweepConfig) (float64, bool) { return c.BusBWGBps.Mean, c.BusBWGBps.N > 0 })),
		}}
	secs := []section{
		{ID: "accuracy", Title: "Accuracy and time to accuracy", Charts: []chartSpec{acc, ttt}},
		{ID: "speed", Title: "Throughput and communication", Charts: []chartSpec{speed, comm}},
	}
	if c, ok := epochChart(sw); ok {
		secs[0].Charts = append(secs[0].Charts, c)
	} else {
		secs[0].Intro = "No chart of the accuracy epoch by epoch: every run has one epoch at most, one point per line (sweep with --epochs 2 or more)."
	}
	if ranks := distinct(sw, func(c analyze.SweepConfig) int { return c.Ranks }); len(ranks) > 1 {
		secs[1].Charts = append(secs[1].Charts, scalingChart(sw, ranks))
	}
	t := SweepTable(sw)
	t.Title = ""
	secs = append(secs, section{ID: "configurations", Title: "Every configuration", Tables: []*Table{t},
		Intro: "Means over each configuration's repeats (min–max where they differ); click a header to sort."})
	return secs
}

// epochChart: test accuracy after each epoch, one line per batch, a
// selector per learning-rate group; false when no run has two epochs (a
// line of one point is a dot).
func epochChart(sw *analyze.Sweep) (chartSpec, bool) {
	c := chartSpec{ID: "chart-sweep-epochs", Title: "Test accuracy, epoch by epoch", Height: 340,
		Note: "one line per global batch; choose the learning-rate rule"}
	epochs := 0
	for _, cf := range sw.Configs {
		epochs = max(epochs, len(cf.EpochAccuracy))
	}
	if epochs < 2 {
		return chartSpec{}, false
	}
	x := make([]string, epochs)
	for i := range x {
		x[i] = strconv.Itoa(i + 1)
	}
	for _, g := range sweepGroups(sw) {
		l := charts.NewLine()
		l.SetGlobalOptions(noAnimation(), tooltipAxis(), legendTop(), grid(),
			charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "epoch"}), charts.WithYAxisOpts(opts.YAxis{Type: "value", Scale: opts.Bool(true)}))
		l.SetXAxis(x)
		for _, cf := range sw.Configs {
			if cf.Group != g {
				continue
			}
			data := make([]opts.LineData, len(cf.EpochAccuracy))
			for i, v := range cf.EpochAccuracy {
				data[i] = opts.LineData{Value: round(v)}
			}
			l.AddSeries(fmt.Sprintf("batch %d", cf.GlobalBatch), data)
		}
		c.Variants = append(c.Variants, variant(g, "pct", "", l))
	}
	return c, true
}

// scalingChart: scaling efficiency against the rank count, per batch.
func scalingChart(sw *analyze.Sweep, ranks []int) chartSpec {
	l := charts.NewLine()
	l.SetGlobalOptions(noAnimation(), tooltipAxis(), legendTop(), grid(),
		charts.WithXAxisOpts(opts.XAxis{Type: "category", Name: "ranks"}), charts.WithYAxisOpts(opts.YAxis{Type: "value"}))
	x := make([]string, len(ranks))
	for i, r := range ranks {
		x[i] = strconv.Itoa(r)
	}
	l.SetXAxis(x)
	type key struct {
		batch      int
		rule, warm string
	}
	var keys []key
	for _, c := range sw.Configs {
		if k := (key{c.BatchSize, c.LRScaling, c.Warmup}); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		data := make([]opts.LineData, len(ranks))
		for i := range data {
			data[i] = opts.LineData{Value: "-"}
		}
		for _, c := range sw.Configs {
			if (key{c.BatchSize, c.LRScaling, c.Warmup}) != k {
				continue
			}
			if c.ScalingEfficiency > 0 {
				data[slices.Index(ranks, c.Ranks)] = opts.LineData{Value: round(c.ScalingEfficiency)}
			}
		}
		l.AddSeries(fmt.Sprintf("batch %d/rank, lr %s", k.batch, k.rule), data)
	}
	return chartSpec{ID: "chart-sweep-scaling", Title: "Scaling efficiency", Height: 340,
		Note:     fmt.Sprintf("samples/s against %d ranks' × the rank ratio, per batch size per rank (1 is perfect)", ranks[0]),
		Variants: []chartVariant{variant("efficiency", "pct", "", l)}}
}

// SweepTable is every configuration of a sweep, one row each: the table
// `commprof sweep` prints and its page shows. A figure over repeats that
// differ reads "median (min–max)"; a time to target some repeats did not
// reach says how many did.
func SweepTable(sw *analyze.Sweep) *Table {
	t := &Table{Title: fmt.Sprintf("Every configuration (target test accuracy %s)", units.Percent(sw.Target, 1)), Full: true, Columns: []Column{{Name: "ranks", Numeric: true}, {Name: "lr"}, {Name: "warm-up", Numeric: true},
		{Name: "batch", Numeric: true}, {Name: "global", Numeric: true}, {Name: "accuracy", Numeric: true}, {Name: "per epoch"},
		{Name: "epoch", Numeric: true}, {Name: "samples/s", Numeric: true}, {Name: "to target", Numeric: true},
		{Name: "bytes/sample", Numeric: true}, {Name: "exposed/sample", Numeric: true}, {Name: "busbw", Numeric: true},
		{Name: "scaling", Numeric: true}},
		Defs: map[string]string{"ranks": "sweep-config", "lr": "sweep-config", "warm-up": "sweep-config", "batch": "sweep-config", "global": "sweep-config",
			"accuracy": "accuracy", "per epoch": "epoch-accuracy", "epoch": "epoch-time", "samples/s": "throughput", "to target": "time-to-target",
			"bytes/sample": "bytes-per-sample", "exposed/sample": "exposed", "busbw": "busbw", "scaling": "scaling"}}
	if sw.ProjectRanks > 0 {
		t.Columns = append(t.Columns, Column{Name: fmt.Sprintf("allreduce@%d", sw.ProjectRanks), Numeric: true})
		t.Defs[t.Columns[len(t.Columns)-1].Name] = "model"
	}
	t.Columns = append(t.Columns, Column{Name: "runs"})
	rng := func(r analyze.Range, f func(float64) string) string {
		switch {
		case r.N == 0:
			return "—"
		case r.N > 1 && r.Min != r.Max:
			return fmt.Sprintf("%s (%s–%s)", f(r.Median), f(r.Min), f(r.Max))
		}
		return f(r.Median)
	}
	pct := func(v float64) string { return units.Percent(v, 2) }
	dur := func(v float64) string { return units.Duration(v) }
	for _, c := range sw.Configs {
		var epochs []string
		for _, a := range c.EpochAccuracy {
			epochs = append(epochs, fmt.Sprintf("%.1f", 100*a))
		}
		ttt := rng(c.TimeToTargetNS, dur)
		if c.Reached > 0 && c.Reached < len(c.Runs) {
			ttt += fmt.Sprintf(" (%d of %d reached it)", c.Reached, len(c.Runs))
		}
		eff := "—"
		if c.ScalingEfficiency > 0 {
			eff = units.Percent(c.ScalingEfficiency, 0)
		}
		row := []string{strconv.Itoa(c.Ranks), c.LRScaling, c.Warmup, strconv.Itoa(c.BatchSize), strconv.Itoa(c.GlobalBatch),
			rng(c.Accuracy, pct), strings.Join(epochs, " → "), rng(c.EpochNS, dur), rng(c.SamplesPerSec, func(v float64) string { return fmt.Sprintf("%.0f", v) }),
			ttt, rng(c.CommBytesPerSample, func(v float64) string { return units.Bytes(int64(v)) }), rng(c.ExposedNSPerSample, dur),
			rng(c.BusBWGBps, units.GBps), eff}
		if c.Failed > 0 {
			row[5] += fmt.Sprintf(" (%d of %d failed)", c.Failed, len(c.Runs))
		}
		keys := []string{strconv.Itoa(c.Ranks), c.LRScaling, c.Warmup, strconv.Itoa(c.BatchSize), strconv.Itoa(c.GlobalBatch),
			fmt.Sprint(c.Accuracy.Mean), "", fmt.Sprint(c.EpochNS.Mean), fmt.Sprint(c.SamplesPerSec.Mean), fmt.Sprint(c.TimeToTargetNS.Mean),
			fmt.Sprint(c.CommBytesPerSample.Mean), fmt.Sprint(c.ExposedNSPerSample.Mean), fmt.Sprint(c.BusBWGBps.Mean), fmt.Sprint(c.ScalingEfficiency)}
		if c.Reached == 0 {
			keys[9] = "Infinity"
		}
		if sw.ProjectRanks > 0 {
			row = append(row, units.Duration(c.ProjectedStepNS))
			keys = append(keys, fmt.Sprint(c.ProjectedStepNS))
		}
		row = append(row, strings.Join(runNames(c.Runs), ", "))
		keys = append(keys, "")
		// Each run's report, beside sweep.html: `commprof sweep` writes
		// it, and serve answers it with the run's page.
		var links []Link
		for i, n := range runNames(c.Runs) {
			// The row says which configuration: the link says which
			// repeat, so the column stays narrow.
			text := "report"
			if len(c.Runs) > 1 {
				text = fmt.Sprintf("repeat %d", i+1)
			}
			links = append(links, Link{Text: text, URL: n + "/report.html"})
		}
		if t.Links == nil {
			t.Links = map[[2]int][]Link{}
		}
		t.Links[[2]int{len(t.Rows), len(row) - 1}] = links
		t.Rows = append(t.Rows, row)
		t.Keys = append(t.Keys, keys)
	}
	return t
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
