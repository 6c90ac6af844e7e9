package analyze

import (
	"cmp"
	"slices"
	"sort"

	"github.com/commprof/commprof/trace"
)

// The collective calls of every rank, merged: which the program waited
// on, their instances across ranks, arrival waits and communicator sizes.

// classifyCalls marks each rank's calls that the program waited on
// (non-blocking) and those outside its timed regions (trace.MarkTimed),
// when the program marked any.
func (s *Summarizer) classifyCalls(ranks []*RankSummarizer) {
	anyTimed := false
	for _, rs := range ranks {
		for _, m := range rs.marks {
			anyTimed = anyTimed || m.Name == trace.MarkTimed
		}
	}
	for _, rs := range ranks {
		if len(rs.waits) > 0 {
			// The name tells a collective's wait from a message's, whose
			// seq is its tag.
			type key struct {
				comm, name int32
				seq        int64
			}
			waited := make(map[key]bool, len(rs.waits))
			for _, w := range rs.waits {
				waited[key{w.comm, w.name, w.seq}] = true
			}
			for i := range rs.calls {
				c := &rs.calls[i]
				c.nonBlocking = waited[key{c.comm, c.name, c.seq}]
			}
		}
		if !anyTimed {
			continue
		}
		var regions []span
		open := int64(-1)
		slices.SortStableFunc(rs.marks, func(a, b Mark) int { return cmp.Compare(a.AtNS, b.AtNS) })
		for _, m := range rs.marks {
			switch {
			case m.Name != trace.MarkTimed:
			case m.Value != 0 && open < 0:
				open = m.AtNS
			case m.Value == 0 && open >= 0:
				regions = append(regions, span{open, m.AtNS})
				open = -1
			}
		}
		regions = union(regions)
		rs.timed = regions
		for i := range rs.calls {
			c := &rs.calls[i]
			j := sort.Search(len(regions), func(j int) bool { return regions[j].hi >= c.start+c.dur })
			c.untimed = j == len(regions) || c.start < regions[j].lo
			c.region = -1
			if !c.untimed {
				c.region = int32(j)
			}
		}
	}
}

// mergeCalls joins the ranks' collective events, sorted by communicator,
// sequence and rank, so that one call's events are adjacent. Each rank's
// events are already nearly in order, so each is sorted on its own and
// the ranks are merged, instead of sorting everything at once.
func (s *Summarizer) mergeCalls(ranks []*RankSummarizer) []callRec {
	n := 0
	lists := make([][]callRec, 0, len(ranks))
	for _, rs := range ranks {
		n += len(rs.calls)
		slices.SortFunc(rs.calls, cmpCall)
		rs.attachWaits()
		lists = append(lists, rs.calls)
		rs.calls = nil
	}
	// Each list holds one rank's calls and the lists come in rank order
	// (Finalize sorts ranks), so the merged order, by (comm, seq, rank),
	// takes each (comm, seq) from the lists in turn: find the smallest
	// head, then drain every list's calls with that key, list by list.
	calls := make([]callRec, 0, n)
	for {
		var key callRec
		found := false
		for _, l := range lists {
			if len(l) > 0 && (!found || l[0].comm < key.comm || l[0].comm == key.comm && l[0].seq < key.seq) {
				key, found = l[0], true
			}
		}
		if !found {
			return calls
		}
		for i, l := range lists {
			j := 0
			for j < len(l) && l[j].comm == key.comm && l[j].seq == key.seq {
				j++
			}
			calls = append(calls, l[:j]...)
			lists[i] = l[j:]
		}
	}
}

func cmpCall(a, b callRec) int {
	if c := cmp.Compare(a.comm, b.comm); c != 0 {
		return c
	}
	if c := cmp.Compare(a.seq, b.seq); c != 0 {
		return c
	}
	return cmp.Compare(a.rank, b.rank)
}

// untimed reports whether any rank's event of call instance in lies
// outside the program's timed regions: such calls (a benchmark's warm-up
// and checks) are left out of timed figures.
func untimed(calls []callRec, in [2]int) bool {
	for _, c := range calls[in[0]:in[1]] {
		if c.untimed {
			return true
		}
	}
	return false
}

// instances returns the [lo, hi) ranges of calls that are one collective
// call on several ranks. Calls without a sequence number are their own.
func instances(calls []callRec) [][2]int {
	var out [][2]int
	for i := 0; i < len(calls); {
		j := i + 1
		if calls[i].seq >= 0 {
			for j < len(calls) && calls[j].comm == calls[i].comm && calls[j].seq == calls[i].seq && calls[j].rank != calls[j-1].rank {
				j++
			}
		}
		out = append(out, [2]int{i, j})
		i = j
	}
	return out
}

// arrivalWaits returns, for each call event, the time its rank spent in
// the call before the last rank arrived.
func arrivalWaits(calls []callRec, inst [][2]int, world int) []int64 {
	w := make([]int64, len(calls))
	for _, in := range inst {
		if in[1]-in[0] < 2 {
			continue
		}
		last := calls[in[0]].start
		for _, c := range calls[in[0]:in[1]] {
			last = max(last, c.start)
		}
		for k := in[0]; k < in[1]; k++ {
			c := &calls[k]
			w[k] = min(max(last-c.start, 0), c.dur)
		}
	}
	return w
}

// commSizes returns each communicator's size as far as the calls show it:
// the most ranks any of its calls had, and for the world at least the
// run's world size. A call recorded by fewer ranks than its communicator
// has (an imported timeline written by rank 0 only, one rank's profiler
// file) still moved the communicator's bytes.
func commSizes(calls []callRec, inst [][2]int, worldID int32, hasWorld bool, world int) map[int32]int {
	out := map[int32]int{}
	for _, in := range inst {
		c := calls[in[0]].comm
		out[c] = max(out[c], in[1]-in[0])
	}
	if hasWorld {
		out[worldID] = max(out[worldID], world)
	}
	return out
}
