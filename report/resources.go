package report

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/go-echarts/go-echarts/v2/charts"
	"github.com/go-echarts/go-echarts/v2/opts"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/units"
)

// memoryRanks is the most ranks the memory chart draws: those of the
// highest peaks.
const memoryRanks = 16

// memoryTable is `stats --by memory`: each rank's memory and CPU
// samples summed up.
func memoryTable(s *analyze.Summary, f formatter) *Table {
	t := &Table{Title: "Memory and CPU by rank", Columns: []Column{
		{Name: "rank", Numeric: true}, {Name: "host"}, {Name: "samples", Numeric: true},
		{Name: "base rss", Numeric: true, Unit: "bytes"}, {Name: "peak rss", Numeric: true, Unit: "bytes"},
		{Name: "mean rss", Numeric: true, Unit: "bytes"}, {Name: "activations", Numeric: true, Unit: "bytes"},
		{Name: "cpu user", Numeric: true, Unit: "ns"}, {Name: "cpu system", Numeric: true, Unit: "ns"},
		{Name: "cpu use", Numeric: true, Unit: "cores"}, {Name: "cpu per compute", Numeric: true, Unit: "ratio"},
		{Name: "waiting for a core", Numeric: true, Unit: "fraction"}}}
	ratio := func(x float64) string {
		if f.raw {
			return strconv.FormatFloat(x, 'f', 3, 64)
		}
		return strconv.FormatFloat(x, 'f', 2, 64)
	}
	none := "—"
	if f.raw {
		none = ""
	}
	for _, r := range s.Ranks {
		row := []string{f.int(int64(r.Rank)), r.Host, f.int(int64(r.Samples))}
		if r.Samples == 0 {
			row = append(row, none, none, none)
		} else {
			row = append(row, f.bytes(float64(r.BaseRSSBytes)), f.bytes(float64(r.PeakRSSBytes)), f.bytes(float64(r.MeanRSSBytes)))
		}
		act := none
		if r.ActivationBytes > 0 {
			act = f.bytes(float64(r.ActivationBytes))
		}
		row = append(row, act)
		if r.SampledNS == 0 {
			row = append(row, none, none, none, none, none)
		} else {
			per := none
			if r.ComputeCPU > 0 {
				per = ratio(r.ComputeCPU)
			}
			row = append(row, f.dur(float64(r.CPUUserNS)), f.dur(float64(r.CPUSystemNS)), ratio(r.CPUUtil), per, f.frac(r.SchedWaitFraction))
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// memoryChart draws each rank's resident memory over the run (the
// ranks of the highest peaks when there are many), on the timeline's
// time axis: seconds since the run's first event.
func memoryChart(s *analyze.Summary) (chartSpec, bool) {
	res := s.Resources
	if !res.Sampled || len(res.Memory) == 0 {
		return chartSpec{}, false
	}
	peak := map[int]int64{}
	for _, r := range s.Ranks {
		peak[r.Rank] = r.PeakRSSBytes
	}
	series := slices.Clone(res.Memory)
	note := "each rank's resident memory (RSS) at every sample"
	if len(series) > memoryRanks {
		slices.SortStableFunc(series, func(a, b analyze.MemorySeries) int {
			switch {
			case peak[a.Rank] > peak[b.Rank]:
				return -1
			case peak[a.Rank] < peak[b.Rank]:
				return 1
			}
			return a.Rank - b.Rank
		})
		series = series[:memoryRanks]
		note = fmt.Sprintf("the resident memory (RSS) of the %d ranks of the highest peaks, of %d", memoryRanks, len(res.Memory))
		slices.SortFunc(series, func(a, b analyze.MemorySeries) int { return a.Rank - b.Rank })
	}
	l := charts.NewLine()
	l.SetGlobalOptions(noAnimation(), tooltipAxis(), legendTop(), grid(),
		charts.WithXAxisOpts(opts.XAxis{Type: "value", Name: "s", Min: "dataMin", Max: "dataMax"}),
		charts.WithYAxisOpts(opts.YAxis{Type: "value", Name: "RSS"}))
	for _, m := range series {
		data := make([]opts.LineData, len(m.AtNS))
		for i := range m.AtNS {
			data[i] = opts.LineData{Value: []interface{}{math.Round(float64(m.AtNS[i])/1e6) / 1e3, m.RSSBytes[i]}, Symbol: "none"}
		}
		l.AddSeries("rank "+strconv.Itoa(m.Rank), data, charts.WithLineChartOpts(opts.LineChart{Step: "end"}))
	}
	return chartSpec{ID: "chart-memory", Title: "Memory over time", Height: 320,
		Note:     note + fmt.Sprintf(", every %s; time in s since the run's first event, as on the timeline", units.Duration(float64(res.PeriodNS))),
		Variants: []chartVariant{variant("rss", "bytes", "", l)}}, true
}

// resourcesSection is the report's memory, CPU and energy section, under
// the timeline; false when no rank sampled.
func resourcesSection(s *analyze.Summary) (section, bool) {
	res := s.Resources
	c, ok := memoryChart(s)
	if !ok {
		return section{}, false
	}
	var intro []string
	for _, r := range s.Ranks {
		if r.Rank == res.PeakRank {
			intro = append(intro, fmt.Sprintf("Rank %d had the highest peak: %s resident, %s more than when recording began (the ranks' peaks average %s).",
				r.Rank, units.Bytes(r.PeakRSSBytes), units.Bytes(r.PeakRSSBytes-r.BaseRSSBytes), units.Bytes(res.MeanPeakRSSBytes)))
		}
	}
	intro = append(intro, fmt.Sprintf("Readings every %s: the curve can miss a peak shorter than that; the peak figures also take the kernel's high-water mark, which misses none.",
		units.Duration(float64(res.PeriodNS))))
	var use []float64
	for _, r := range s.Ranks {
		if r.SampledNS > 0 {
			use = append(use, r.CPUUtil)
		}
	}
	if len(use) > 0 {
		slices.Sort(use)
		waited := ""
		if res.SchedWaitMedian > 0 {
			waited = fmt.Sprintf(" and waited for a core %.1f%% of the time (median)", 100*res.SchedWaitMedian)
		}
		intro = append(intro, fmt.Sprintf("CPU: the ranks kept %.2f to %.2f cores busy (median %.2f)%s: a rank that waits in a blocking call uses little CPU, one that computes about a core per busy thread, one descheduled by the host waits for a core.",
			use[0], use[len(use)-1], use[len(use)/2], waited))
	}
	if len(res.Descheduled) > 0 {
		intro = append(intro, fmt.Sprintf("Descheduled: rank %s got less than %.0f%% of the ranks' median CPU per second of compute (%.2f), or waited for a core at least %.0f%% of the time and twice the median (%.1f%%): the host took their cores away.",
			joinInts(res.Descheduled, 8), 100*analyze.DescheduledBelow, res.ComputeCPUMedian, 100*analyze.DescheduledWait, 100*res.SchedWaitMedian))
	}
	if e := res.Energy; e.Measured {
		line := fmt.Sprintf("Energy: %.1f J package and %.1f J DRAM over %d hosts", e.PackageJ, e.DRAMJ, e.Hosts)
		if e.GPUs > 0 {
			line += fmt.Sprintf(", %.1f J on %d GPUs", e.GPUJ, e.GPUs)
		}
		line += fmt.Sprintf(", %.1f W.", e.Watts)
		if e.PerStepJ > 0 {
			line += fmt.Sprintf(" %.3g J a step", e.PerStepJ)
			if e.PerSampleJ > 0 {
				line += fmt.Sprintf(", %.3g mJ a sample", 1e3*e.PerSampleJ)
			}
			line += "."
		}
		intro = append(intro, line)
	} else {
		intro = append(intro, "Energy: "+e.Note+".")
	}
	return section{ID: "memory", Title: "Memory, CPU and energy", Charts: []chartSpec{c}, Intro: strings.Join(intro, " ")}, true
}

// resourceCards are the run's memory and energy cards.
func resourceCards(s *analyze.Summary) []card {
	res := s.Resources
	if !res.Sampled || res.PeakRank < 0 {
		return nil
	}
	cs := []card{{Label: "peak memory", Value: units.Bytes(res.PeakRSSBytes), Def: "rss",
		Detail: fmt.Sprintf("rank %d, the highest of %d ranks' peaks (mean %s)", res.PeakRank, len(res.Memory), units.Bytes(res.MeanPeakRSSBytes))}}
	if e := res.Energy; e.Measured {
		d := fmt.Sprintf("%.1f W over %d hosts", e.Watts, e.Hosts)
		if e.PerStepJ > 0 {
			d += fmt.Sprintf(" · %.3g J a step", e.PerStepJ)
		}
		cs = append(cs, card{Label: "energy", Value: fmt.Sprintf("%.1f J", e.PackageJ+e.DRAMJ+e.GPUJ), Detail: d, Def: "energy"})
	}
	return cs
}

// stragglerCPU says, for a named straggler with CPU samples, whether it
// was descheduled (as analyze judged it): its CPU per compute time and
// its wait for a core against the ranks'.
func stragglerCPU(s *analyze.Summary, rank int) string {
	res := s.Resources
	for _, r := range s.Ranks {
		if r.Rank != rank || r.SampledNS == 0 {
			continue
		}
		var parts []string
		if r.ComputeCPU > 0 && res.ComputeCPUMedian > 0 {
			parts = append(parts, fmt.Sprintf("%.2f s of CPU per s of compute (ranks' median %.2f)", r.ComputeCPU, res.ComputeCPUMedian))
		}
		parts = append(parts, fmt.Sprintf("waited for a core %.1f%% of the time (median %.1f%%)", 100*r.SchedWaitFraction, 100*res.SchedWaitMedian))
		verdict := "not descheduled"
		if slices.Contains(res.Descheduled, rank) {
			verdict = "descheduled"
		}
		return " · " + verdict + ": " + strings.Join(parts, ", ")
	}
	return ""
}

// writeResources is the overview's line on memory and energy, for runs
// whose ranks sampled.
func writeResources(w io.Writer, s *analyze.Summary) {
	res := s.Resources
	if !res.Sampled || res.PeakRank < 0 {
		return
	}
	fmt.Fprintf(w, "memory: peak %s on rank %d (ranks' peaks average %s), sampled every %s; --by memory for each rank\n",
		units.Bytes(res.PeakRSSBytes), res.PeakRank, units.Bytes(res.MeanPeakRSSBytes), units.Duration(float64(res.PeriodNS)))
	if e := res.Energy; e.Measured {
		fmt.Fprintf(w, "energy: %.1f J (package %.1f J, DRAM %.1f J, %d GPUs %.1f J) over %d host(s), %.1f W", e.PackageJ+e.DRAMJ+e.GPUJ, e.PackageJ, e.DRAMJ,
			e.GPUs, e.GPUJ, e.Hosts, e.Watts)
		if e.PerStepJ > 0 {
			fmt.Fprintf(w, ", %.3g J a step", e.PerStepJ)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintf(w, "energy: %s\n", e.Note)
	}
}
