package analyze

import (
	"fmt"
	"slices"

	"github.com/commprof/commprof/trace"
)

// Each rank's figures: its spans of work and communication, waits,
// lateness, and the run's extent (hosts, ranks beyond the world).

// rankSpans is one rank's time in communication: comm is when a
// collective or point-to-point call was in flight, exposed the part of it
// the program was blocked on (a blocking call, or its wait on a
// non-blocking one); the rest of comm ran behind the program's work.
type rankSpans struct {
	comm, exposed, compute *spanSeq
}

// spans computes every rank's rankSpans. A run recorded before wait
// events existed has no way to tell when its program was blocked: there,
// as then, the communication not covered by compute spans is exposed.
// A point-to-point message the program waited for (Isend, Irecv) blocked
// it only while it waited; another (Send, Recv) for its whole span.
// A rank's calls on one communicator come in sequence order, which is
// the order of their starts: their spans are merged as they come, a
// communicator at a time, and the communicators' then merged.
func (s *Summarizer) spans(ranks []*RankSummarizer, src *callSource, world int) []rankSpans {
	haveWaits := false
	for _, rs := range ranks {
		haveWaits = haveWaits || rs.waits.n > 0
	}
	comm := make([]map[int32]*spanUnion, world)
	blocked := make([]map[int32]*spanUnion, world) // the program blocked in: only needed with waits
	for r := range world {
		comm[r], blocked[r] = map[int32]*spanUnion{}, map[int32]*spanUnion{}
	}
	add := func(m map[int32]*spanUnion, c *callRec) {
		u := m[c.comm]
		if u == nil {
			u = &spanUnion{sp: s.spill}
			m[c.comm] = u
		}
		u.add(span{c.start, c.start + c.dur})
	}
	src.each(func(calls []callRec, _ [][2]int, _ []int64) {
		for i := range calls {
			c := &calls[i]
			add(comm[c.rank], c)
			if haveWaits && !c.nonBlocking {
				add(blocked[c.rank], c)
			}
		}
	})
	seqs := func(m map[int32]*spanUnion, more ...*spanSeq) []*spanSeq {
		out := more
		for _, u := range m {
			out = append(out, u.seq())
		}
		return out
	}
	out := make([]rankSpans, world)
	for _, rs := range ranks {
		r := rs.rank
		cs := mergeSeqs(s.spill, seqs(comm[r], rs.p2pSeq)...)
		comm[r] = nil
		ps := rs.computeSeq
		var ex *spanSeq
		if haveWaits {
			// Blocked: in its waits, and in the messages no wait
			// completed.
			ws, ms := spanUnion{sp: s.spill}, spanUnion{sp: s.spill}
			for w := range rs.waits.all() {
				ws.add(span{w.start, w.end})
			}
			for m := range rs.msgs.all() {
				if !m.waited {
					ms.add(span{m.start, m.end})
				}
			}
			ex = intersectSeq(s.spill, cs, mergeSeqs(s.spill, seqs(blocked[r], ws.seq(), ms.seq())...))
			blocked[r] = nil
		} else {
			ex = subtractSeq(s.spill, cs, intersectSeq(s.spill, cs, ps))
		}
		out[r] = rankSpans{comm: cs, exposed: ex, compute: ps}
	}
	return out
}

func (s *Summarizer) rankStats(ranks []*RankSummarizer, src *callSource, cen *callCensus, sp []rankSpans, world int) []RankStats {
	wait := rankWaits(src.each, cen.order, world)
	var shared [][]span // per rank: its calls that other ranks hold too
	if m := s.meta.Manifest; m != nil && m.Source != nil && m.Source.PartialRanks {
		shared = sharedCalls(src, world)
	}
	lastN, late, lateN := cen.lastN, cen.late, cen.lateN
	out := make([]RankStats, 0, len(ranks))
	for _, rs := range ranks {
		r := rs.rank
		x := sp[r]
		st := RankStats{Rank: r, Host: rs.host, Events: rs.events, ComputeNS: x.compute.length(), CommNS: x.comm.length(),
			ExposedNS: x.exposed.length(), WaitNS: wait[r], RecvWaitNS: rs.recvWait, SendNS: rs.sendNS, RecvNS: rs.recvNS,
			BytesSent: rs.bytesSent, BytesRecv: rs.bytesRecv, MsgsSent: rs.msgsSent, MsgsRecv: rs.msgsRecv,
			LocalBytes: rs.selfBytes, LocalMsgs: rs.selfMsgs, LastArrivals: lastN[r], Truncated: rs.truncated}
		if shared != nil {
			// Ranks hold different calls: what each spent in the calls
			// several ranks hold, so that the ranks compare.
			sh := union(shared[r])
			st.CommNS, st.ExposedNS = length(sh), intersectSeq(nil, packSpans(nil, sh), x.exposed).length()
		}
		st.OverlappedNS = st.CommNS - st.ExposedNS
		if lateN[r] > 0 {
			st.MeanLateNS = late[r] / float64(lateN[r])
		}
		out = append(out, st)
	}
	return out
}

// waitOrder tells, per rank, whether the spans of its arrival waits come
// in order of their starts as the calls are merged.
type waitOrder struct {
	last     []int64
	open     []bool
	unsorted []bool
}

func newWaitOrder(world int) *waitOrder {
	return &waitOrder{last: make([]int64, world), open: make([]bool, world), unsorted: make([]bool, world)}
}

func (o *waitOrder) add(calls []callRec, waits []int64) {
	for i, c := range calls {
		if waits[i] > 0 {
			o.unsorted[c.rank] = o.unsorted[c.rank] || o.open[c.rank] && c.start < o.last[c.rank]
			o.last[c.rank], o.open[c.rank] = c.start, true
		}
	}
}

// rankWaits is each rank's time waiting for the last rank to arrive: the
// union of its waits, since calls that overlap on a rank (non-blocking
// ones, Horovod's concurrent negotiations) wait at the same time. each
// is a pass over the calls, which order has seen.
func rankWaits(each func(func(calls []callRec, inst [][2]int, waits []int64)), order *waitOrder, world int) []int64 {
	// A rank's calls come in (comm, seq) order, which is time order on
	// one communicator: the wait spans of a rank whose come in order are
	// merged as they come; another's are collected and sorted.
	type acc struct {
		lo, hi, total  int64
		open, unsorted bool
		all            []span
	}
	per := make([]acc, world)
	for r := range per {
		per[r].unsorted = order.unsorted[r]
	}
	each(func(calls []callRec, _ [][2]int, waits []int64) {
		for i, c := range calls {
			if waits[i] <= 0 {
				continue
			}
			a := &per[c.rank]
			sp := span{c.start, c.start + waits[i]}
			switch {
			case a.unsorted:
				a.all = append(a.all, sp)
			case !a.open:
				a.lo, a.hi, a.open = sp.lo, sp.hi, true
			case sp.lo <= a.hi:
				a.hi = max(a.hi, sp.hi)
			default:
				a.total += a.hi - a.lo
				a.lo, a.hi = sp.lo, sp.hi
			}
		}
	})
	out := make([]int64, world)
	for r, a := range per {
		switch {
		case a.unsorted:
			out[r] = length(union(a.all))
		case a.open:
			out[r] = a.total + a.hi - a.lo
		}
	}
	return out
}

// sharedCalls returns, per rank, the spans of its calls that at least one
// other rank holds too.
func sharedCalls(src *callSource, world int) [][]span {
	out := make([][]span, world)
	src.each(func(calls []callRec, inst [][2]int, _ []int64) {
		for _, in := range inst {
			if in[1]-in[0] < 2 {
				continue
			}
			for _, c := range calls[in[0]:in[1]] {
				out[c.rank] = append(out[c.rank], span{c.start, c.start + c.dur})
			}
		}
	})
	return out
}

// extent returns how many ranks the rank-by-rank tables (the traffic
// matrices, the skew series) span: the ranks that have streams and the
// peers their messages name, and the world of the run's manifest when it
// is no larger. A rank far beyond how many distinct ranks the run shows
// (a world_size of a million read from run.json, a damaged peer value, a
// lone stream named rank-1048575) would make the n × n tables grow with
// one value read from a file instead of the run's content: such ranks
// are left out of the tables, and far lists a problem for each, naming
// its stream and column.
func (s *Summarizer) extent(ranks []*RankSummarizer) (n int, far []string) {
	type origin struct {
		rank int32  // the stream that names it
		col  string // as its own rank, or as a peer
	}
	var dense [denseRanks]bool
	seen := map[int32]origin{} // ranks from denseRanks on
	distinct := 0
	see := func(r int32, o origin) {
		if r < denseRanks {
			if !dense[r] {
				dense[r] = true
				distinct++
			}
			return
		}
		if _, ok := seen[r]; !ok {
			seen[r] = o
			distinct++
		}
	}
	for _, rs := range ranks {
		see(int32(rs.rank), origin{int32(rs.rank), trace.ColRank})
	}
	for _, rs := range ranks {
		peer := origin{int32(rs.rank), trace.ColPeer}
		for name, st := range rs.sendNSTo {
			for p, ns := range st {
				if ns > 0 {
					see(int32(p), peer)
				}
			}
			for p := range rs.sendFar[name] {
				see(p, peer)
			}
		}
		for _, acc := range rs.matrices {
			for p, msgs := range acc.msgs {
				if msgs > 0 {
					see(int32(p), peer)
				}
			}
			for p := range acc.far {
				see(p, peer)
			}
		}
	}
	// A run that shows k distinct ranks spans at most 2k+64 of them: a
	// world where most ranks left no trace still gets its tables, one
	// where a single rank is numbered in the millions does not.
	bound := 2*distinct + 64
	for r := range denseRanks {
		if dense[r] && r < bound {
			n = r + 1
		}
	}
	var left []int32
	for r := range seen {
		if int(r) < bound {
			n = max(n, int(r)+1)
		} else {
			left = append(left, r)
		}
	}
	if w := s.meta.WorldSize; w <= bound {
		n = max(n, w)
	}
	slices.Sort(left)
	for i, r := range left {
		if i == 8 {
			far = append(far, fmt.Sprintf("%d more ranks far beyond the %d the run shows are left out of the traffic matrices and the skew series", len(left)-i, distinct))
			break
		}
		o := seen[r]
		if o.col == trace.ColRank {
			far = append(far, fmt.Sprintf("%s: column %s is %d, far beyond the %d ranks the run shows; this rank is left out of the traffic matrices and the skew series",
				trace.RankFile(int(o.rank)), o.col, r, distinct))
		} else {
			far = append(far, fmt.Sprintf("%s (rank %d): column %s names rank %d, far beyond the %d ranks the run shows; its traffic with it is left out of the traffic matrices",
				trace.RankFile(int(o.rank)), o.rank, o.col, r, distinct))
		}
	}
	return n, far
}
