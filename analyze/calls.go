package analyze

import (
	"cmp"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/commprof/commprof/trace"
)

// The collective calls of every rank, merged: which the program waited
// on, their instances across ranks, arrival waits and communicator sizes.

// callClass marks one rank's calls as they are merged: those the
// program waited on (non-blocking), those outside its timed regions
// (trace.MarkTimed) when it marked any, and each call's message waits
// that came after its event.
type callClass struct {
	ord     []int32 // the communicators' order (commOrd)
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
		cl := &callClass{ord: s.ord, timed: anyTimed, late: rs.lateWaits(s.ord), waited: rs.waited}
		out[i] = cl
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

// mark sets c's flags and adds its late message waits; calls come in
// (comm, seq) order. Each pass over the calls marks with its own copy of
// the class (mark moves the copy's late waits on).
func (cl *callClass) mark(c *callRec) {
	if cl.waited != nil && !c.nonBlocking {
		c.nonBlocking = cl.waited[callKey{c.comm, c.name, c.seq}]
	}
	if cl.timed {
		_, in := timedRegion(cl.regions, *c)
		c.untimed = !in
	}
	ws := cl.late
	co := commOrd(cl.ord, c.comm)
	for len(ws) > 0 && (commOrd(cl.ord, ws[0].comm) < co || ws[0].comm == c.comm && ws[0].seq < c.seq) {
		ws = ws[1:]
	}
	for k := 0; k < len(ws) && ws[k].comm == c.comm && ws[k].seq == c.seq; k++ {
		c.recvWait += ws[k].wait
	}
	cl.late = ws
}

// callSource is the run's collective calls, merged across ranks in
// (comm, seq, rank) order so that one call's events are adjacent, each
// marked with its rank's class. The calls stay packed in the ranks' logs:
// each pass merges them again, a chunk of whole instances at a time, so
// that what a pass holds does not grow with the run. Passes may run at
// once.
type callSource struct {
	logs    []*callLog // in rank order (Finalize sorts ranks)
	ranks   []int
	classes []*callClass
	world   int
	n       int   // calls
	perRank []int // calls per rank, indexed by rank
	chunk   int
	ord     []int32 // the communicators' order (commOrd)
	rides   *rides  // passes shared by the analyses that ask at once; nil: each its own
}

// callChunk is the most calls a pass holds at once, past which it hands
// them on at the next instance's start.
const callChunk = 1 << 16

func (s *Summarizer) callSource(ranks []*RankSummarizer, classes []*callClass, world int) *callSource {
	src := &callSource{classes: classes, world: world, perRank: make([]int, world), chunk: cmp.Or(s.chunk, callChunk), ord: s.ord}
	for _, rs := range ranks {
		src.logs = append(src.logs, &rs.calls)
		src.ranks = append(src.ranks, rs.rank)
		src.n += rs.calls.n
		if rs.rank < world {
			src.perRank[rs.rank] += rs.calls.n
		}
	}
	if src.n >= cmp.Or(s.shareCalls, shareCalls) {
		src.rides = &rides{}
	}
	return src
}

// shareCalls is how many calls a run has before its analyses share their
// passes over them: below it a pass costs less than a rendezvous.
const shareCalls = 1 << 18

// rides lets the analyses that run side by side share their passes over
// the calls: unpacking and merging the ranks' logs was most of a large
// run's summary, made again for each of a dozen passes. A pass asked for
// joins the next round; a round starts shortly after its first rider
// asks, merges the calls once, and hands each chunk to every rider, the
// riders side by side, each seeing every chunk in order as its own pass
// would have.
type rides struct {
	mu      sync.Mutex
	waiting []*rider
	running bool
}

type rider struct {
	f    func(calls []callRec, inst [][2]int, waits []int64)
	done chan struct{}
}

// rideGather is how long a round waits for more riders after its first.
const rideGather = 2 * time.Millisecond

// ride runs f as one rider of the next round.
func (src *callSource) ride(f func(calls []callRec, inst [][2]int, waits []int64)) {
	rs := src.rides
	me := &rider{f: f, done: make(chan struct{})}
	rs.mu.Lock()
	rs.waiting = append(rs.waiting, me)
	if !rs.running {
		rs.running = true
		go src.drive()
	}
	rs.mu.Unlock()
	<-me.done
}

// drive runs rounds while riders wait, and ends (sleeping only while a
// rider waits) when none does.
func (src *callSource) drive() {
	rs := src.rides
	for {
		time.Sleep(rideGather)
		rs.mu.Lock()
		riders := rs.waiting
		rs.waiting = nil
		rs.mu.Unlock()
		src.round(riders)
		for _, r := range riders {
			close(r.done)
		}
		rs.mu.Lock()
		if len(rs.waiting) == 0 {
			rs.running = false
			rs.mu.Unlock()
			return
		}
		rs.mu.Unlock()
	}
}

// round makes one pass over the calls for riders: while the riders take
// one chunk, side by side, the next is merged into the other buffer.
func (src *callSource) round(riders []*rider) {
	var wg sync.WaitGroup
	src.scan(func(c *callChunkBuf) {
		wg.Wait() // the riders are done with the chunk before: its buffer is the next one's
		for _, r := range riders {
			wg.Go(func() { r.f(c.calls, c.inst, c.waits) })
		}
	}, func() { wg.Wait() })
}

// each hands f the calls in chunks of whole instances, with the
// instances (index ranges into the chunk) and each call's arrival wait.
// The slices are reused: f must not keep them. Calls of each from
// different goroutines at once may share one pass (rides): f is then
// called from another goroutine, never from two at once, and must not
// itself start a pass (each, collect), which would wait for the round f
// holds up.
func (src *callSource) each(f func(calls []callRec, inst [][2]int, waits []int64)) {
	if src.rides != nil {
		src.ride(f)
		return
	}
	src.scan(func(c *callChunkBuf) { f(c.calls, c.inst, c.waits) }, func() {})
}

// callChunkBuf is one chunk of a pass: calls, their instances and waits.
type callChunkBuf struct {
	calls []callRec
	inst  [][2]int
	waits []int64
}

// scan merges the calls, handing each chunk to emit in one of two
// buffers by turns: emit must be done with a buffer when it is given the
// chunk after next (the one before ends when emit returns). end is called
// after the last chunk.
func (src *callSource) scan(emit func(*callChunkBuf), end func()) {
	rds := make([]*logReader, len(src.logs))
	cls := make([]callClass, len(src.logs))
	for i, l := range src.logs {
		rds[i] = l.reader(src.ranks[i], src.ord)
		cls[i] = *src.classes[i]
	}
	var bufs [2]callChunkBuf
	turn := 0
	calls := make([]callRec, 0, min(src.n, src.chunk+len(rds)))
	bufs[1].calls = make([]callRec, 0, cap(calls))
	flush := func() {
		c := &bufs[turn]
		c.calls = calls
		c.inst = instancesInto(c.inst[:0], calls)
		c.waits = arrivalWaitsInto(c.waits, calls, c.inst)
		emit(c)
		turn = 1 - turn
		calls = bufs[turn].calls[:0]
	}
	// The readers come in rank order, so the merged order, by (comm,
	// seq, rank), takes each (comm, seq) from the readers in turn: find
	// the smallest head, then drain every reader's calls with that key,
	// reader by reader.
	for {
		var key callRec
		var keyOrd int32
		found := false
		for _, r := range rds {
			if !r.ok {
				continue
			}
			o := commOrd(src.ord, r.head.comm)
			if !found || o < keyOrd || r.head.comm == key.comm && r.head.seq < key.seq {
				key, keyOrd, found = r.head, o, true
			}
		}
		if !found {
			break
		}
		if len(calls) >= src.chunk {
			flush()
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
	if len(calls) > 0 {
		flush()
	}
	end()
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

// collect returns the calls of the instances whose first member started
// at a time keep takes, and their instances: the calls held at once,
// for the analyses that need them together (the replay).
func (src *callSource) collect(keep func(start int64) bool) ([]callRec, [][2]int) {
	var calls []callRec
	var inst [][2]int
	src.each(func(cs []callRec, in [][2]int, _ []int64) {
		for _, r := range in {
			first := cs[r[0]].start
			for _, c := range cs[r[0]:r[1]] {
				first = min(first, c.start)
			}
			if keep(first) {
				at := len(calls)
				calls = append(calls, cs[r[0]:r[1]]...)
				inst = append(inst, [2]int{at, len(calls)})
			}
		}
	})
	return calls, inst
}

// instancesInto appends to out the [lo, hi) ranges of calls that are one
// collective call on several ranks. Calls without a sequence number are
// their own.
func instancesInto(out [][2]int, calls []callRec) [][2]int {
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

// arrivalWaitsInto returns, in w's memory, for each call event the time
// its rank spent in the call before the last rank arrived.
func arrivalWaitsInto(w []int64, calls []callRec, inst [][2]int) []int64 {
	w = slices.Grow(w[:0], len(calls))[:len(calls)]
	clear(w)
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

// callCensus is what several analyses need to know of the calls before
// their own passes over them, gathered in one pass.
type callCensus struct {
	// sizes is each communicator's size as far as the calls show it: the
	// most ranks any of its calls had, and for the world at least the
	// run's world size. A call recorded by fewer ranks than its
	// communicator has (an imported timeline written by rank 0 only, one
	// rank's profiler file) still moved the communicator's bytes.
	sizes map[int32]int
	bench map[collKey]float64 // benchAcc's times
	// lastN, late and lateN are, per rank, the multi-rank calls it
	// arrived last in, the sum of its arrival minus the mean arrival of
	// the others, and how many calls that sums.
	lastN []int64
	late  []float64
	lateN []int64
	order *waitOrder
	// labelled: some multi-rank call names a label; worldCalls: the
	// timed world calls of two ranks or more.
	labelled   bool
	worldCalls int
	// lo and hi bound the calls' starts (seen: there were calls).
	lo, hi int64
	seen   bool
}

func (s *Summarizer) census(ranks []*RankSummarizer, src *callSource) *callCensus {
	world := src.world
	cen := &callCensus{sizes: map[int32]int{}, lastN: make([]int64, world), late: make([]float64, world),
		lateN: make([]int64, world), order: newWaitOrder(world)}
	worldID, hasWorld := s.strIdx["world"]
	bench := newBenchAcc(ranks)
	src.each(func(calls []callRec, inst [][2]int, waits []int64) {
		bench.add(calls)
		cen.order.add(calls, waits)
		for _, c := range calls {
			if !cen.seen {
				cen.lo, cen.hi, cen.seen = c.start, c.start, true
			}
			cen.lo, cen.hi = min(cen.lo, c.start), max(cen.hi, c.start)
		}
		for _, in := range inst {
			c0 := calls[in[0]]
			cen.sizes[c0.comm] = max(cen.sizes[c0.comm], in[1]-in[0])
			if in[1]-in[0] < 2 {
				continue
			}
			cen.lateness(calls, in)
			if untimed(calls, in) {
				continue
			}
			cen.labelled = cen.labelled || c0.label != 0
			if hasWorld && c0.comm == worldID {
				cen.worldCalls++
			}
		}
	})
	if hasWorld {
		cen.sizes[worldID] = max(cen.sizes[worldID], s.meta.WorldSize)
	}
	cen.bench = bench.times()
	return cen
}

// lateness counts instance in of two ranks or more: who arrived last,
// and each rank's arrival minus the mean arrival of the others.
func (cen *callCensus) lateness(calls []callRec, in [2]int) {
	k := in[1] - in[0]
	var sum float64
	li, first := in[0], calls[in[0]].start
	for j := in[0]; j < in[1]; j++ {
		sum += float64(calls[j].start)
		first = min(first, calls[j].start)
		if calls[j].start > calls[li].start {
			li = j
		}
	}
	if calls[li].start > first {
		cen.lastN[calls[li].rank]++
	}
	for j := in[0]; j < in[1]; j++ {
		others := (sum - float64(calls[j].start)) / float64(k-1)
		cen.late[calls[j].rank] += float64(calls[j].start) - others
		cen.lateN[calls[j].rank]++
	}
}
