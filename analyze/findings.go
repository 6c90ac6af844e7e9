package analyze

import (
	"fmt"
	"strings"

	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/trace"
)

func pct(x float64) string { return units.Percent(x, 0) }

func headline(s *Summary) Headline {
	h := Headline{Straggler: -1, Steps: s.StepSummary.Steps}
	var comm, exposed, wait, span float64
	for _, r := range s.Ranks {
		comm += float64(r.CommNS)
		exposed += float64(r.ExposedNS)
		wait += float64(r.WaitNS)
	}
	if n := len(s.Ranks); n > 0 {
		span = float64(s.Run.SpanNS) * float64(n)
	}
	if h.Steps > 0 {
		st := s.StepSummary
		h.StepNS, h.StepP95NS, h.SamplesPerSec = st.Time.Mean, float64(st.Time.P95), st.SamplesPerSec
		c := st.ExposedNS + st.OverlappedNS
		if st.Time.Mean > 0 {
			h.CommFraction = c / st.Time.Mean
		}
		if c > 0 {
			h.ExposedFrac = st.ExposedNS / c
		}
		h.ExposedNS = st.ExposedNS
	} else {
		if span > 0 {
			h.CommFraction = comm / span
		}
		if comm > 0 {
			h.ExposedFrac = exposed / comm
		}
		if n := len(s.Ranks); n > 0 {
			h.ExposedNS = exposed / float64(n)
		}
	}
	if comm > 0 {
		h.WaitFraction = wait / comm
	}
	var most int64 = -1
	steady := steadyCalls(s)
	for _, o := range s.Ops {
		if o.Bytes > most && o.BusBWGBps > 0 && o.Calls >= steady {
			most, h.BusBWOp, h.BusBWGBps, h.TransferBusBWGBps = o.Bytes, o.Op, o.BusBWGBps, o.TransferBusBWGBps
		}
	}
	h.LinkGBps = s.Fit.LinkGBps
	if h.LinkGBps > 0 {
		h.BusBWOfLink = h.BusBWGBps / h.LinkGBps
	}
	if st := s.Stragglers; len(st.Named) > 0 {
		h.Straggler = st.Named[0]
		for _, rc := range st.Ranks {
			if rc.Rank == h.Straggler {
				h.StragglerCostNS, h.StragglerShare = rc.PerWindowNS, rc.Share
			}
		}
		for _, rs := range s.Ranks {
			if rs.Rank == h.Straggler && s.Skew.Calls > 0 {
				h.StragglerFrac = float64(rs.LastArrivals) / float64(s.Skew.Calls)
				h.StragglerLateNS = rs.MeanLateNS
			}
		}
	}
	h.Accuracy = trace.Number(s.Run.Metrics[trace.MetricTestAccuracy])
	if s.IsUnknown("communication") {
		h.CommFraction = 0 // the source cannot give it (Summary.Unknown)
	}
	judge(s, &h)
	return h
}

// findings says in plain words what the headline numbers mean.
func findings(s *Summary) []string {
	h := s.Headline
	out := []string{}
	if inj := s.Run.Injected; len(inj) > 0 {
		out = append(out, fmt.Sprintf("faults were injected into this run on purpose (%s): its figures include them (docs/inject.md)",
			strings.Join(inj, "; ")))
	}
	if h.Steps > 0 {
		f := fmt.Sprintf("a step takes %s (p95 %s)", units.Duration(h.StepNS), units.Duration(h.StepP95NS))
		if h.SamplesPerSec > 0 {
			f += fmt.Sprintf(", %s samples/s over %d ranks", units.Int(h.SamplesPerSec), s.Run.WorldSize)
		}
		out = append(out, f)
		if !s.IsUnknown("exposed") {
			out = append(out, fmt.Sprintf("communication is %s of the step, %s of it exposed (%s per step not hidden behind compute)",
				pct(h.CommFraction), pct(h.ExposedFrac), units.Duration(h.ExposedNS)))
		}
	} else if len(s.Ranks) > 0 && s.Run.SpanNS > 0 && trace.ParseConfig(s.Run.Config).Program != "bench" && !s.IsUnknown("communication") {
		// (A benchmark is all communication by design.)
		f := fmt.Sprintf("communication takes %s of the run's %s on an average rank", pct(h.CommFraction), units.Duration(float64(s.Run.SpanNS)))
		if s.IsUnknown("exposed") {
			f += "; how much of it the program waited for, the source cannot say"
		} else {
			f += fmt.Sprintf(", %s of it exposed", pct(h.ExposedFrac))
		}
		out = append(out, f)
	}
	out = append(out, stragglerFinding(s)...)
	if h.WaitFraction > 0 {
		out = append(out, fmt.Sprintf("ranks spend %s of their communication time waiting for the last rank to arrive", pct(h.WaitFraction)))
	}
	if h.BusBWGBps > 0 {
		f := fmt.Sprintf("%s reaches %s bus bandwidth from call to completion", h.BusBWOp, units.GBps(h.BusBWGBps))
		if h.TransferBusBWGBps > 0 && h.TransferBusBWGBps > 1.05*h.BusBWGBps {
			f += fmt.Sprintf(" (%s once the last rank had arrived)", units.GBps(h.TransferBusBWGBps))
		}
		if h.LinkGBps > 0 {
			f += fmt.Sprintf(", %s of the %s the messages' fit gives the link", pct(h.BusBWOfLink), units.GBps(h.LinkGBps))
		}
		out = append(out, f)
	}
	out = append(out, p2pFindings(s)...)
	if bl := s.Skew.ByLabel; len(bl) > 0 && bl[0].WaitNS > 0 {
		l := bl[0]
		f := fmt.Sprintf("the %s whose calls kept ranks waiting longest is %q: %s of waiting over %d calls",
			l.Op, l.Label, units.Duration(float64(l.WaitNS)), l.Calls)
		if len(l.Last) > 0 && l.Last[0].LateNS > 0 {
			f += fmt.Sprintf("; rank %d came last %d times, %s after the next latest in all", l.Last[0].Rank, l.Last[0].Calls, units.Duration(float64(l.Last[0].LateNS)))
		}
		out = append(out, f)
	}
	steady := steadyCalls(s)
	var top *CollStats
	var total int64
	for i := range s.Collectives {
		c := &s.Collectives[i]
		total += c.Time.Sum
		if c.Calls >= steady && (top == nil || c.Time.Sum > top.Time.Sum) {
			top = c
		}
	}
	if top != nil && total > 0 && len(s.Collectives) > 1 && s.PointToPoint.Share < 0.5 {
		out = append(out, fmt.Sprintf("the largest cost is %s %s at %s: %s of collective time in %d calls",
			top.Op, top.Algo, top.BucketLbl, pct(float64(top.Time.Sum)/float64(total)), top.Calls))
	}
	if !s.Fit.Usable && s.Fit.Reason != "" && s.Fit.Calls > 0 {
		out = append(out, "no alpha-beta-gamma model is shown: "+s.Fit.Reason)
	}
	if p := s.Projection; p != nil && len(p.Ranks) > 1 && len(p.Algos) > 0 {
		last := len(p.Ranks) - 1
		best := 0
		for i := range p.Algos {
			if p.TimeNS[i][last] < p.TimeNS[best][last] {
				best = i
			}
		}
		out = append(out, fmt.Sprintf("at %d ranks the model puts allreduce at %s per %s with %s, the fastest of %d algorithms",
			p.Ranks[last], units.Duration(p.TimeNS[best][last]), p.Basis, p.Algos[best], len(p.Algos)))
	}
	return out
}

// stragglerFinding says what the what-if replay found about stragglers.
// It states the rule that was applied (analyze/stragglers.go): a rank named
// costs more than the run's noise bound and 5% of the run.
func stragglerFinding(s *Summary) []string {
	st := s.Stragglers
	if !st.Replayed {
		return nil
	}
	unit := "step"
	if st.Basis != "step" {
		unit = "call"
	}
	noise := fmt.Sprintf("the run's noise (a rank with no slowness of its own would cost up to %s, at %s confidence)",
		units.Duration(float64(st.NoiseBoundNS)), units.Percent(st.Confidence, 0))
	// A run too long to replay whole was replayed over a stretch: its
	// shares are of that stretch, and the finding says which.
	of, stretch := "of the run", ""
	if sm := st.Sample; sm != nil && sm.TotalOps > 0 {
		of = "of the stretch replayed"
		share, from, to := sm.Describe(s.Run.FirstNS)
		stretch = fmt.Sprintf("; the run is too long to replay whole: replayed over %s of its operations, %s to %s into it", share, from, to)
	}
	var out []string
	for k, r := range st.Named {
		var rc RankCost
		for _, x := range st.Ranks {
			if x.Rank == r {
				rc = x
			}
		}
		f := fmt.Sprintf("rank %d is a straggler: its slowness cost the job %s (%s %s, %s per %s, in %d of %d %ss",
			r, units.Duration(float64(rc.CostNS)), pct(rc.Share), of, units.Duration(rc.PerWindowNS), unit, rc.Windows, st.Windows, unit)
		switch {
		case !st.SplitKnown:
			f += "; how it splits between its own work and its transfers is unknown, as the run could not be replayed"
		case rc.WorkNS > 0 && rc.TransferNS > 0:
			f += fmt.Sprintf("; %s of it in its own work between communication calls, %s in its part of the transfers",
				units.Duration(float64(rc.WorkNS)), units.Duration(float64(rc.TransferNS)))
		case rc.TransferNS > 0:
			f += "; all of it in its part of the transfers"
		case rc.WorkNS > 0 && st.WorkOnly:
			f += "; all of it in its own work between communication calls, the only part judged where the trace does not say when messages arrived"
		case rc.WorkNS > 0:
			f += "; all of it in its own work between communication calls"
		}
		f += "), above " + noise
		if k == len(st.Named)-1 && st.WindowNS > 0 {
			who := fmt.Sprintf("rank %d's", r)
			if len(st.Named) > 1 {
				who = "these ranks'"
			}
			f += fmt.Sprintf("; without %s slowness a %s would take %s instead of %s", who, unit, units.Duration(st.WithoutNS), units.Duration(st.WindowNS))
		}
		out = append(out, f+stretch)
	}
	if len(st.Named) == 0 {
		var f string
		switch rs := st.Ranks; {
		case st.Undecided != "":
			f = "no straggler verdict: " + st.Undecided
		case len(rs) > 0 && st.Why != "" && st.Why != "within the run's noise":
			f = fmt.Sprintf("no rank stands out: the costliest, rank %d, cost %s (%s %s), %s; %s",
				rs[0].Rank, units.Duration(float64(rs[0].CostNS)), pct(rs[0].Share), of, st.Why, noise)
		case len(rs) > 0:
			f = fmt.Sprintf("no rank stands out above the run's noise: the costliest, rank %d, cost %s (%s %s), %s more than the median rank, "+
				"under the %s a rank with no slowness of its own would be seen to cost (%s confidence)",
				rs[0].Rank, units.Duration(float64(rs[0].CostNS)), pct(rs[0].Share), of, units.Duration(float64(max(rs[0].CostNS-st.NoiseNS, 0))),
				units.Duration(float64(st.NoiseBoundNS)), units.Percent(st.Confidence, 0))
		default:
			f = "no rank stands out above " + noise
		}
		out = append(out, f+stretch)
	}
	return out
}

// steadyCalls is how many calls an op or size needs to speak for the
// run: once every other step in training (set-up and tear-down calls,
// such as the first broadcast of the weights, do not).
func steadyCalls(s *Summary) int64 {
	return max(int64(s.StepSummary.Steps/2), 1)
}

// p2pFindings speaks of runs whose communication is mostly the program's
// own point-to-point messages, such as a parameter server's.
func p2pFindings(s *Summary) []string {
	p := s.PointToPoint
	if p.Share < 0.5 || p.Messages == 0 {
		return nil
	}
	out := []string{fmt.Sprintf("point-to-point messages (Send and Recv, such as a parameter server's pushes and pulls) are %s of communication time: %s messages, %s",
		pct(p.Share), units.Int(float64(p.Messages)), units.Bytes(p.Bytes))}
	for i, h := range p.Hubs {
		if i == 2 {
			break
		}
		f := fmt.Sprintf("rank %d receives from %d ranks: %s", h.Rank, h.Peers, units.Bytes(h.Bytes))
		if h.PerStepBytes > 0 {
			f += fmt.Sprintf(" (%s per step)", units.Bytes(int64(h.PerStepBytes)))
		}
		if h.GBps > 0 { // 0 where the receives' waits are unknown (PMPI)
			f += fmt.Sprintf(" at %s while receiving", units.GBps(h.GBps))
		}
		if t := h.TransferNS + h.WaitNS; t > 0 && !s.IsUnknown("recv_wait") {
			f += fmt.Sprintf(", and its receives wait for their senders %s of the time", pct(float64(h.WaitNS)/float64(t)))
		}
		out = append(out, f)
	}
	return out
}
