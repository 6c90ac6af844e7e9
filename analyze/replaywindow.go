package analyze

import (
	"math"
	"strconv"

	"github.com/commprof/commprof/internal/stretch"
	"github.com/commprof/commprof/internal/units"
)

// replayBudget bounds the operations the what-if replay lays out: rank
// calls, point-to-point messages, waits and step bounds. The replay keeps
// about 250 bytes per operation at its peak and replays the run a few
// dozen times: 2^18 operations took 65 MB and 1.5 s of the 100M-event
// benchmark run's summary. A run with more is replayed over the stretch
// in its middle that holds this many.
const replayBudget = 1 << 18

// ReplaySample says which part of the run the replay covered, when it
// did not cover all of it.
type ReplaySample struct {
	// FromNS and ToNS bound the stretch replayed (clock times, as
	// events'): the calls and messages that started in it.
	FromNS int64 `json:"from_ns"`
	ToNS   int64 `json:"to_ns"`
	// Ops is how many operations (rank calls, messages, waits, step
	// bounds) it holds, of TotalOps in the run.
	Ops      int64 `json:"ops"`
	TotalOps int64 `json:"total_ops"`
}

// Describe says how much of the run the stretch holds and where it lies,
// as the findings and the report print it: the share of the run's
// operations (with the decimals a small share needs: 0.26%, not 0%) and
// the stretch's bounds from the run's first event at firstNS (with the
// digits that tell them apart: 256.6 s to 257.4 s, not 257 s to 257 s).
func (sm *ReplaySample) Describe(firstNS int64) (share, from, to string) {
	f := float64(sm.Ops) / float64(max(sm.TotalOps, 1))
	d := 0 // under 1%: two significant digits
	if f > 0 && f < 0.01 {
		d = min(int(math.Ceil(-math.Log10(100*f)))+1, 6)
	}
	share = units.Percent(f, d)
	a, b := float64(sm.FromNS-firstNS), float64(sm.ToNS-firstNS)
	from, to = units.Duration(a), units.Duration(b)
	if from == to {
		// Seconds, with the decimals that tell the bounds apart.
		for d := 1; d <= 9 && from == to; d++ {
			from, to = strconv.FormatFloat(a/1e9, 'f', d, 64)+" s", strconv.FormatFloat(b/1e9, 'f', d, 64)+" s"
		}
	}
	return share, from, to
}

// replayRank is what the replay lays out of one rank besides its calls:
// its messages, waits and steps, as they came.
type replayRank struct {
	rank    int
	p2pMsgs []p2pRec
	waits   []waitRec
	steps   []stepRec
}

// replayWindow returns the ranks, calls and instances the replay lays
// out: all of them when the run's operations fit in budget, else those
// that started in the stretch in the middle of the run that holds about
// budget of them, copied (the summary's other analyses read the
// originals meanwhile). sample is nil when nothing was left out.
func replayWindow(ranks []*RankSummarizer, src *callSource, cen *callCensus, budget int64) ([]*replayRank, []callRec, [][2]int, *ReplaySample) {
	total := int64(src.n)
	for _, rs := range ranks {
		total += int64(rs.msgs.n + rs.waits.n + 2*len(rs.steps))
	}
	all := func(int64) bool { return true }
	if total <= budget {
		calls, inst := src.collect(all)
		return replayRanks(ranks, true, 0, 0, nil), calls, inst, nil
	}
	lo, hi, seen := cen.lo, cen.hi, cen.seen
	see := func(t int64) {
		if !seen {
			lo, hi, seen = t, t, true
		}
		lo, hi = min(lo, t), max(hi, t)
	}
	for _, rs := range ranks {
		for m := range rs.msgs.all() {
			see(m.start)
		}
	}
	if !seen || hi <= lo {
		calls, inst := src.collect(all)
		return replayRanks(ranks, true, 0, 0, nil), calls, inst, nil
	}
	// Count the operations by start time in fine buckets, then widen a
	// stretch of buckets from the median operation's while it holds no
	// more than the budget.
	const nb = 1 << 14
	var hist [nb]int64
	width := float64(hi-lo+1) / nb
	bucket := func(t int64) int { return min(max(int(float64(t-lo)/width), 0), nb-1) }
	src.each(func(calls []callRec, _ [][2]int, _ []int64) {
		for _, c := range calls {
			hist[bucket(c.start)]++
		}
	})
	for _, rs := range ranks {
		for m := range rs.msgs.all() {
			hist[bucket(m.start)]++
		}
		for w := range rs.waits.all() {
			hist[bucket(w.start)]++
		}
		for _, st := range rs.steps {
			hist[bucket(st.start)] += 2
		}
	}
	mid, acc := 0, int64(0)
	for mid < nb-1 && acc+hist[mid] < total/2 {
		acc += hist[mid]
		mid++
	}
	a, b := stretch.Around(hist[:], 0, nb, mid, budget)
	from, to := lo+int64(float64(a)*width), lo+int64(float64(b)*width)
	if b == nb {
		to = hi + 1
	}
	in := func(t int64) bool { return t >= from && t < to }

	// Instances by their first member's start.
	wc, wi := src.collect(in)
	keep := map[[2]int64]bool{} // (comm, seq) of kept calls: their waits go with them
	for _, r := range wi {
		keep[[2]int64{int64(wc[r[0]].comm), wc[r[0]].seq}] = true
	}
	wr := replayRanks(ranks, false, from, to, keep)
	kept := int64(len(wc))
	for _, c := range wr {
		kept += int64(len(c.p2pMsgs) + len(c.waits) + 2*len(c.steps))
	}
	return wr, wc, wi, &ReplaySample{FromNS: from, ToNS: to, Ops: kept, TotalOps: total}
}

// replayRanks copies what the replay lays out of each rank: everything
// if whole, else the messages that started in [from, to), the waits of
// those (which start from from up to the last kept message's end), the
// collectives' waits keep holds, and the steps within [from, to).
func replayRanks(ranks []*RankSummarizer, whole bool, from, to int64, keep map[[2]int64]bool) []*replayRank {
	in := func(t int64) bool { return whole || (t >= from && t < to) }
	out := make([]*replayRank, 0, len(ranks))
	for _, rs := range ranks {
		c := &replayRank{rank: rs.rank}
		var last int64 // the last kept message's end: waits for it come before
		for m := range rs.msgs.all() {
			if in(m.start) {
				c.p2pMsgs = append(c.p2pMsgs, m)
				last = max(last, m.end)
			}
		}
		for w := range rs.waits.all() {
			switch {
			case whole:
			case w.name == rs.s.p2p:
				if w.start < from || w.start > last {
					continue
				}
			case !keep[[2]int64{int64(w.comm), w.seq}]:
				continue
			}
			c.waits = append(c.waits, w)
		}
		for _, st := range rs.steps {
			if whole || (in(st.start) && st.end < to) {
				c.steps = append(c.steps, st)
			}
		}
		out = append(out, c)
	}
	return out
}
