package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/trace"
)

// isBench reports whether a run is a benchmark of collectives (commprof
// bench, or nccl-tests' output imported): all communication by design, so
// its report leads with bandwidth by size, and figures such as the
// communication share of a step say nothing.
func isBench(s *analyze.Summary) bool {
	return trace.ParseConfig(s.Run.Config).Program == "bench" || (s.Run.Source != nil && s.Run.Source.Format == "nccl-tests")
}

// benchWhat says what a benchmark run measured (bench allreduce), for
// its page's subtitle: the run's name is its title, as on every page of
// a run. "" when the run does not say.
func benchWhat(s *analyze.Summary) string {
	if c := trace.ParseConfig(s.Run.Config); c.Program == "bench" && c.Op != "" {
		return "bench " + c.Op
	}
	return ""
}

// benchTable is the benchmark's table: one row per op, algorithm and
// size, as `commprof bench` prints it (its time is the slowest rank's
// time per call of the timed loop, its algbw and busbw the same figures).
func benchTable(s *analyze.Summary) *Table {
	t := &Table{Full: true,
		Note: "One row per op, algorithm and size of the timed iterations: time is the slowest rank's mean time per call, as commprof bench and nccl-tests measure it.",
		Columns: []Column{{Name: "op"}, {Name: "size", Numeric: true}, {Name: "algo"}, {Name: "ranks", Numeric: true}, {Name: "calls", Numeric: true},
			{Name: "time", Numeric: true, Unit: "ns"}, {Name: "algbw", Numeric: true, Unit: "GB/s"}, {Name: "busbw", Numeric: true, Unit: "GB/s"},
			{Name: "wait", Numeric: true}},
		Defs: map[string]string{"size": "call-size", "ranks": "coll-ranks", "calls": "calls", "time": "call-time", "algbw": "algbw", "busbw": "busbw", "wait": "wait"}}
	cs := append([]analyze.CollStats(nil), s.Collectives...)
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].Op != cs[j].Op {
			return cs[i].Op < cs[j].Op
		}
		return cs[i].Bytes/max(cs[i].Calls, 1) < cs[j].Bytes/max(cs[j].Calls, 1)
	})
	for _, c := range cs {
		if c.Calls == 0 || c.Op == "barrier" {
			continue
		}
		size := c.Bytes / c.Calls
		perCall := "—"
		if c.CallNS > 0 {
			perCall = units.Duration(c.CallNS)
		}
		t.Rows = append(t.Rows, []string{c.Op, units.Bytes(size), c.Algo, fmt.Sprint(c.Ranks), fmt.Sprint(c.Calls), perCall,
			fmt.Sprintf("%.3f", c.AlgBWGBps), fmt.Sprintf("%.3f", c.BusBWGBps), units.Percent(c.WaitFraction, 1)})
		t.Keys = append(t.Keys, []string{c.Op, fmt.Sprint(size), c.Algo, fmt.Sprint(c.Ranks), fmt.Sprint(c.Calls), fmt.Sprint(c.CallNS),
			fmt.Sprint(c.AlgBWGBps), fmt.Sprint(c.BusBWGBps), fmt.Sprint(c.WaitFraction)})
	}
	return t
}

// benchCards are a benchmark's key numbers, as the analysis found them:
// its best busbw and where, the busbw at its largest size, and the sizes
// it covered.
func benchCards(s *analyze.Summary) []card {
	var cs []card
	h := s.Headline
	if p, l := h.PeakBusBW, h.LargestBusBW; p != nil && l != nil {
		cs = append(cs, card{Label: "peak bus bandwidth", Value: units.GBps(p.BusBWGBps), Def: "busbw",
			Detail: fmt.Sprintf("%s %s at %s", p.Op, p.Algo, units.Bytes(p.CallBytes))})
		cs = append(cs, card{Label: "at the largest size", Value: units.GBps(l.BusBWGBps), Def: "busbw",
			Detail: fmt.Sprintf("%s %s at %s; algbw %s", l.Op, l.Algo, units.Bytes(l.CallBytes), units.GBps(l.AlgBWGBps))})
		var names []string
		for _, o := range s.Ops {
			if o.Op != "barrier" && o.Calls > 0 {
				names = append(names, o.Op)
			}
		}
		sort.Strings(names)
		cs = append(cs, card{Label: "sizes", Value: fmt.Sprintf("%s – %s", units.Bytes(h.CallBytesMin), units.Bytes(h.CallBytesMax)), Def: "call-size",
			Detail: fmt.Sprintf("%s on %d ranks", strings.Join(names, ", "), s.Run.WorldSize)})
	}
	if h := s.Headline; h.LinkGBps > 0 {
		cs = append(cs, card{Label: "link bandwidth", Value: units.GBps(h.LinkGBps), Def: "link", Detail: "1/β of the model fitted to the messages"})
	}
	if st := s.Stragglers; st.Replayed {
		c := card{Label: "straggler", Value: "none stands out", Def: "straggler"}
		if h := s.Headline; h.Straggler >= 0 {
			c.Value, c.Class = fmt.Sprintf("rank %d", h.Straggler), "bad"
			c.Detail = fmt.Sprintf("%s %s", units.Percent(h.StragglerShare, 0), ofReplayed(s))
		}
		c.Detail = strings.TrimPrefix(c.Detail+replaySample(s), " · ")
		cs = append(cs, c)
	}
	return cs
}
