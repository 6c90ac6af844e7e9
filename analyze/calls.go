package analyze

import (
	"cmp"
	"slices"
	"sort"

	"github.com/commprof/commprof/trace"
)

// The collective calls of every rank, merged: which the program waited
// on, their instances across ranks, arrival waits and communicator sizes.

// callClass marks one rank's calls as they are merged: those the
// program waited on (non-blocking), those outside its timed regions
// (trace.MarkTimed) when it marked any, and each call's message waits
// that came after its event.
type callClass struct {
	waited  map[callKey]bool
	timed   bool
	regions []span
	late    []collWaitRec // sorted by (comm, seq)
}

// callKey names a collective's call, or a message's wait (by name: its
// seq is a tag).
type callKey struct {
	comm, name int32
	seq        int64
}

// classifyCalls works out, for each rank, what its calls are marked with
// as they are merged (rs.timed is set here).
func (s *Summarizer) classifyCalls(ranks []*RankSummarizer) []*callClass {
	anyTimed := false
	for _, rs := range ranks {
		for _, m := range rs.marks {
			anyTimed = anyTimed || m.Name == trace.MarkTimed
		}
	}
	out := make([]*callClass, len(ranks))
	for i, rs := range ranks {
		cl := &callClass{timed: anyTimed, late: rs.lateWaits()}
		out[i] = cl
		if len(rs.waits) > 0 {
			cl.waited = make(map[callKey]bool, len(rs.waits))
			for _, w := range rs.waits {
				cl.waited[callKey{w.comm, w.name, w.seq}] = true
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
		cl.regions = union(regions)
		rs.timed = cl.regions
	}
	return out
}

// timedRegion returns the timed region (of a rank's merged regions) that
// holds call c, if one does.
func timedRegion(regions []span, c callRec) (int32, bool) {
	j := sort.Search(len(regions), func(j int) bool { return regions[j].hi >= c.start+c.dur })
	if j == len(regions) || c.start < regions[j].lo {
		return -1, false
	}
	return int32(j), true
}

// mark sets c's flags and adds its late message waits; calls
// come in (comm, seq) order.
func (cl *callClass) mark(c *callRec) {
	if cl.waited != nil {
		c.nonBlocking = cl.waited[callKey{c.comm, c.name, c.seq}]
	}
	if cl.timed {
		_, in := timedRegion(cl.regions, *c)
		c.untimed = !in
	}
	ws := cl.late
	for len(ws) > 0 && (ws[0].comm < c.comm || ws[0].comm == c.comm && ws[0].seq < c.seq) {
		ws = ws[1:]
	}
	for k := 0; k < len(ws) && ws[k].comm == c.comm && ws[k].seq == c.seq; k++ {
		c.recvWait += ws[k].wait
	}
	cl.late = ws
}

// mergeCalls joins the ranks' collective events, sorted by communicator,
// sequence and rank, so that one call's events are adjacent, marking each
// with its rank's class. Each rank's events are already in order, or
// nearly: each is read (or sorted) on its own and the ranks are merged,
// instead of sorting everything at once. The ranks' logs are read once,
// and let go as they are.
func (s *Summarizer) mergeCalls(ranks []*RankSummarizer, classes []*callClass) []callRec {
	n := 0
	rds := make([]*logReader, 0, len(ranks))
	cls := make([]*callClass, 0, len(ranks))
	for i, rs := range ranks {
		n += rs.calls.n
		rds = append(rds, rs.calls.reader(rs.rank))
		cls = append(cls, classes[i])
		rs.calls = callLog{}
	}
	// The readers come in rank order (Finalize sorts ranks), so the
	// merged order, by (comm, seq, rank), takes each (comm, seq) from
	// the readers in turn: find the smallest head, then drain every
	// reader's calls with that key, reader by reader.
	calls := make([]callRec, 0, n)
	for {
		var key callRec
		found := false
		for _, r := range rds {
			if r.ok && (!found || r.head.comm < key.comm || r.head.comm == key.comm && r.head.seq < key.seq) {
				key, found = r.head, true
			}
		}
		if !found {
			return calls
		}
		for i, r := range rds {
			for r.ok && r.head.comm == key.comm && r.head.seq == key.seq {
				c := r.head
				cls[i].mark(&c)
				calls = append(calls, c)
				r.next()
			}
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
