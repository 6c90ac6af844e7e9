package analyze

import (
	"cmp"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/commprof/commprof/trace"
)

// Meta is what a summary needs to know about a run besides its events:
// the manifest's facts, filled by whoever read the run.
type Meta struct {
	Dir       string
	Manifest  *trace.Manifest // nil if the run has none
	WorldSize int
	DiskBytes int64
	Problems  []string
}

// PointToPoint is the op name of messages sent with Send and Recv rather
// than inside a collective (a parameter server's pushes and pulls). Their
// spans count as communication time like collectives'.
const PointToPoint = "sendrecv"

// Summarizer accumulates a run's events. Ranks are fed through their own
// RankSummarizer, which may run in parallel with the others'; Finalize
// merges them. A Summarizer is used once.
type Summarizer struct {
	meta Meta

	mu     sync.Mutex
	strs   []string
	strIdx map[string]int32
	ranks  map[int]*RankSummarizer
	p2p    int32 // the name of point-to-point messages, which belong to no collective
}

// NewSummarizer starts a summary of a run.
func NewSummarizer(meta Meta) *Summarizer {
	s := &Summarizer{meta: meta, strIdx: map[string]int32{}, ranks: map[int]*RankSummarizer{}}
	s.intern("")
	s.p2p = s.intern(PointToPoint)
	return s
}

func (s *Summarizer) intern(str string) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.strIdx[str]; ok {
		return i
	}
	i := int32(len(s.strs))
	s.strs = append(s.strs, str)
	s.strIdx[str] = i
	return i
}

func (s *Summarizer) str(i int32) string { return s.strs[i] }

// Rank returns the accumulator of rank r's events, creating it. Each
// RankSummarizer must be fed from one goroutine at a time.
func (s *Summarizer) Rank(r int, host string) *RankSummarizer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rs, ok := s.ranks[r]; ok {
		return rs
	}
	rs := &RankSummarizer{s: s, rank: r, host: host, world: max(s.meta.WorldSize, r+1),
		computeNames: map[int32]*NameTime{}, matrices: map[int32]*matrixAcc{}, sizes: map[sizeKey]*SizeStats{},
		sizesByName: map[int32]*[65]*SizeStats{},
		patterns:    map[patKey]*patAcc{}}
	s.ranks[r] = rs
	return rs
}

// RankSummarizer accumulates one rank's events.
type RankSummarizer struct {
	s           *Summarizer
	rank, world int
	host        string
	truncated   bool

	dicts [3]dictMap // names, algos, comms of the current stream

	events                   int64
	calls                    []callRec
	p2p                      []span // point-to-point sends and receives
	compute                  []span
	computeNames             map[int32]*NameTime
	steps                    []stepRec
	marks                    []Mark
	sendNS, recvNS, recvWait int64
	bytesSent, bytesRecv     int64
	msgsSent, msgsRecv       int64
	first, last              int64
	matrices                 map[int32]*matrixAcc // by op name; the world matrix is summed at the end
	sizes                    map[sizeKey]*SizeStats
	link                     linReg // recv transfer time against bytes
	patterns                 map[patKey]*patAcc
	lastPat                  *patAcc
	lastPatKey               patKey
	// The last accumulators used, since consecutive messages mostly share
	// them: a map lookup per message would cost more than the rest.
	lastMatrix     *matrixAcc
	lastMatrixName int32
	lastSizes      *[65]*SizeStats // one op's size buckets (SizeBucket is 0..64), as in sizes
	lastSizesName  int32
	sizesByName    map[int32]*[65]*SizeStats
}

// callRec is one rank's event of one collective call.
type callRec struct {
	comm, name, algo int32
	rank, root       int32
	step             int32
	seq              int64
	start, dur       int64
	bytes            int64
}

type stepRec struct {
	step       int32
	start, end int64
}

type sizeKey struct {
	name   int32
	bucket int
}

type matrixAcc struct{ bytes, msgs, time []int64 } // by source rank

// dictMap maps a stream's dictionary indices to interned strings. Stream
// dictionaries only grow, so the map is extended, not rebuilt, unless a
// known entry changed (a different stream).
type dictMap struct {
	src []string
	ids []int32
}

func (d *dictMap) update(s *Summarizer, dict []string) {
	n := len(d.src)
	if n > len(dict) || (n > 0 && d.src[n-1] != dict[n-1]) {
		d.src, d.ids, n = d.src[:0], d.ids[:0], 0
	}
	for _, str := range dict[n:] {
		d.src = append(d.src, str)
		d.ids = append(d.ids, s.intern(str))
	}
}

// SetTruncated records that the rank's stream was cut.
func (rs *RankSummarizer) SetTruncated() { rs.truncated = true }

// AddEvents adds events of this rank (convenience for runs in memory).
func (rs *RankSummarizer) AddEvents(evs []trace.Event) {
	const chunk = 8192
	var b trace.Batch
	for len(evs) > 0 {
		n := min(chunk, len(evs))
		toBatch(evs[:n], &b)
		rs.AddBatch(&b)
		evs = evs[n:]
	}
}

// SummaryColumns returns the trace columns AddBatch reads; a reader need
// not decode the others.
func SummaryColumns() []string {
	return []string{trace.ColKind, trace.ColName, trace.ColStart, trace.ColDur, trace.ColBytes, trace.ColPeer,
		trace.ColSeq, trace.ColStep, trace.ColAlgo, trace.ColRoot, trace.ColComm, trace.ColWait, trace.ColValue}
}

// AddBatch adds one batch of this rank's events; b may be reused after.
func (rs *RankSummarizer) AddBatch(b *trace.Batch) {
	rs.dicts[0].update(rs.s, b.Names)
	rs.dicts[1].update(rs.s, b.Algos)
	rs.dicts[2].update(rs.s, b.Comms)
	names, algos, comms := rs.dicts[0].ids, rs.dicts[1].ids, rs.dicts[2].ids
	if rs.events == 0 && b.Len > 0 {
		rs.first, rs.last = b.Start[0], b.Start[0]
	}
	rs.events += int64(b.Len)
	for i := 0; i < b.Len; i++ {
		start, dur := b.Start[i], b.Dur[i]
		rs.first = min(rs.first, start)
		rs.last = max(rs.last, start+dur)
		switch b.Kind[i] {
		case trace.KindCollective:
			rs.calls = append(rs.calls, callRec{comm: comms[b.Comm[i]], name: names[b.Name[i]], algo: algos[b.Algo[i]],
				rank: int32(rs.rank), root: b.Root[i], step: b.Step[i], seq: b.Seq[i], start: start, dur: dur, bytes: b.Bytes[i]})
		case trace.KindSend:
			if names[b.Name[i]] == rs.s.p2p {
				rs.p2p = append(rs.p2p, span{start, start + dur})
			}
			rs.sendNS += dur
			rs.bytesSent += b.Bytes[i]
			rs.msgsSent++
			rs.pattern(comms[b.Comm[i]], names[b.Name[i]], algos[b.Algo[i]], b.Seq[i], b.Peer[i])
		case trace.KindRecv:
			if names[b.Name[i]] == rs.s.p2p {
				rs.p2p = append(rs.p2p, span{start, start + dur})
			}
			rs.recv(names[b.Name[i]], b.Peer[i], b.Bytes[i], dur, b.Wait[i])
		case trace.KindCompute:
			rs.compute = append(rs.compute, span{start, start + dur})
			nt := rs.computeNames[names[b.Name[i]]]
			if nt == nil {
				nt = &NameTime{}
				rs.computeNames[names[b.Name[i]]] = nt
			}
			nt.Count++
			nt.TimeNS += dur
		case trace.KindStep:
			rs.steps = append(rs.steps, stepRec{step: b.Step[i], start: start, end: start + dur})
		case trace.KindMark:
			rs.marks = append(rs.marks, Mark{Rank: rs.rank, Name: b.Names[b.Name[i]], AtNS: start, Step: int(b.Step[i]), Value: b.Value[i]})
		}
	}
}

func (rs *RankSummarizer) recv(name, peer int32, bytes, dur, wait int64) {
	rs.recvNS += dur
	rs.recvWait += wait
	rs.bytesRecv += bytes
	rs.msgsRecv++
	if peer >= 0 {
		if int(peer) >= rs.world {
			rs.world = int(peer) + 1
		}
		m := rs.lastMatrix
		if m == nil || rs.lastMatrixName != name {
			m = rs.matrices[name]
			if m == nil {
				m = &matrixAcc{}
				rs.matrices[name] = m
			}
			rs.lastMatrix, rs.lastMatrixName = m, name
		}
		if len(m.bytes) < rs.world {
			m.bytes = append(m.bytes, make([]int64, rs.world-len(m.bytes))...)
			m.msgs = append(m.msgs, make([]int64, rs.world-len(m.msgs))...)
			m.time = append(m.time, make([]int64, rs.world-len(m.time))...)
		}
		m.bytes[peer] += bytes
		m.msgs[peer]++
		m.time[peer] += dur
	}
	// Consecutive messages of one op alternate between sizes (a ring's
	// chunks differ by one element), so the buckets of the last op are
	// looked up by index.
	bs := rs.lastSizes
	if bs == nil || rs.lastSizesName != name {
		if bs = rs.sizesByName[name]; bs == nil {
			bs = new([65]*SizeStats)
			rs.sizesByName[name] = bs
		}
		rs.lastSizes, rs.lastSizesName = bs, name
	}
	bk := SizeBucket(bytes)
	st := bs[bk]
	if st == nil {
		st = &SizeStats{}
		rs.sizes[sizeKey{name, bk}] = st
		bs[bk] = st
	}
	st.Messages++
	st.Bytes += bytes
	st.TimeNS += dur
	st.WaitNS += wait
	rs.link.add(float64(bytes), float64(dur-wait))
}

// Finalize merges the ranks and computes every figure. Call it once,
// after every RankSummarizer has been fed.
func (s *Summarizer) Finalize() *Summary {
	sum := &Summary{SchemaVersion: SchemaVersion, Findings: []string{}, Marks: []Mark{}, Problems: s.meta.Problems}
	if sum.Problems == nil {
		sum.Problems = []string{}
	}
	ranks := make([]*RankSummarizer, 0, len(s.ranks))
	for _, rs := range s.ranks {
		ranks = append(ranks, rs)
	}
	sort.Slice(ranks, func(i, j int) bool { return ranks[i].rank < ranks[j].rank })
	world := s.meta.WorldSize
	for _, rs := range ranks {
		world = max(world, rs.world, rs.rank+1)
	}
	sum.Run = s.runInfo(ranks, world)

	calls := s.mergeCalls(ranks)
	inst := instances(calls)
	waits := arrivalWaits(calls, inst, world)
	// The analyses below only read calls, waits and the ranks'
	// accumulators, and each writes its own part of the summary: they run
	// side by side.
	var wg sync.WaitGroup
	par := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	par(func() { sum.Collectives, sum.Ops = s.collStats(calls, inst, waits) })
	par(func() { sum.Ranks = s.rankStats(ranks, calls, inst, waits, world) })
	par(func() {
		sum.Matrix, sum.OpMatrices = s.matrices(ranks, world)
		sum.MessageSizes = s.messageSizes(ranks)
		sum.Compute = s.computeNames(ranks)
		sum.Patterns = s.patterns(ranks, calls)
	})
	par(func() { sum.Skew = s.skew(calls, inst, world) })
	par(func() { sum.Steps, sum.StepSummary = s.steps(ranks, calls, waits, sum.Run.SamplesPerStep) })
	par(func() { sum.fitAcc = s.fitSums(ranks, calls, inst, waits) })
	wg.Wait()
	labelPatterns(sum)
	for _, rs := range ranks {
		sum.Marks = append(sum.Marks, rs.marks...)
	}
	sort.SliceStable(sum.Marks, func(i, j int) bool { return sum.Marks[i].AtNS < sum.Marks[j].AtNS })
	sum.Fit = sum.fitAcc.solve()
	sum.stepCalls = s.stepCalls(calls, inst, waits, len(sum.Steps))
	sum.Projection = sum.Project(DefaultProjectionRanks(world), nil)
	sum.Headline = headline(sum)
	sum.Findings = findings(sum)
	return sum
}

func (s *Summarizer) runInfo(ranks []*RankSummarizer, world int) RunInfo {
	ri := RunInfo{Dir: s.meta.Dir, WorldSize: world, Ranks: len(ranks), DiskBytes: s.meta.DiskBytes,
		Config: map[string]string{}, Metrics: map[string]float64{}, Hosts: []string{}, Command: []string{}}
	first, last := int64(0), int64(0)
	for i, rs := range ranks {
		ri.Events += rs.events
		if rs.events == 0 {
			continue
		}
		if i == 0 || rs.first < first {
			first = rs.first
		}
		last = max(last, rs.last)
	}
	ri.FirstNS, ri.SpanNS = first, max(last-first, 0)
	hosts := map[string]bool{}
	for _, rs := range ranks {
		if rs.host != "" && !hosts[rs.host] {
			hosts[rs.host] = true
			ri.Hosts = append(ri.Hosts, rs.host)
		}
	}
	if m := s.meta.Manifest; m != nil {
		ri.Name, ri.ID, ri.Status, ri.Error = m.Name, m.RunID, m.Status, m.Error
		if m.Command != nil {
			ri.Command = m.Command
		}
		for k, v := range m.Config {
			ri.Config[k] = v
		}
		for k, v := range m.Metrics {
			ri.Metrics[k] = v
		}
		if !m.Start.IsZero() {
			ri.Start = m.Start.UTC().Format("2006-01-02T15:04:05Z07:00")
		}
		ri.ClockMethod, ri.ClockUncertNS = m.Clock.Method, m.Clock.UncertaintyNS
	}
	if bs, err := strconv.Atoi(ri.Config["batch_size"]); err == nil && bs > 0 {
		ri.SamplesPerStep = bs * world
	}
	return ri
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

// busFactor is the nccl-tests factor from algbw to busbw on n ranks.
func busFactor(op string, n int) float64 {
	if n < 1 {
		return 1
	}
	switch op {
	case "allreduce":
		return 2 * float64(n-1) / float64(n)
	case "allgather", "reducescatter", "alltoall":
		return float64(n-1) / float64(n)
	}
	return 1
}

type collKey struct {
	name, algo int32
	bucket     int
}

func (s *Summarizer) collStats(calls []callRec, inst [][2]int, waits []int64) ([]CollStats, []OpStats) {
	type acc struct {
		st     CollStats
		durs   []int64
		ranksN map[int]int
	}
	groups := map[collKey]*acc{}
	for _, in := range inst {
		c0 := calls[in[0]]
		k := collKey{c0.name, c0.algo, SizeBucket(c0.bytes)}
		a := groups[k]
		if a == nil {
			a = &acc{ranksN: map[int]int{}}
			groups[k] = a
		}
		a.st.Calls++
		a.st.Bytes += c0.bytes
		a.ranksN[in[1]-in[0]]++
		for j := in[0]; j < in[1]; j++ {
			a.durs = append(a.durs, calls[j].dur)
			a.st.WaitNS += waits[j]
		}
	}
	var out []CollStats
	ops := map[string]*OpStats{}
	var total int64
	for k, a := range groups {
		st := a.st
		st.Op, st.Algo, st.Bucket, st.BucketLbl = s.str(k.name), s.str(k.algo), k.bucket, BucketLabel(k.bucket)
		best := 0
		for n, c := range a.ranksN {
			if c > a.ranksN[best] || (c == a.ranksN[best] && n > best) {
				best = n
			}
		}
		st.Ranks = best
		st.Time = dist(a.durs)
		if st.Time.Mean > 0 && st.Calls > 0 {
			st.AlgBWGBps = float64(st.Bytes) / float64(st.Calls) / st.Time.Mean
			st.BusBWGBps = st.AlgBWGBps * busFactor(st.Op, st.Ranks)
		}
		out = append(out, st)
	}
	slices.SortFunc(out, cmpColl)
	// Sum the ops over the sorted groups, so that the floating-point sums
	// are the same on every read of a run.
	for _, st := range out {
		o := ops[st.Op]
		if o == nil {
			o = &OpStats{Op: st.Op}
			ops[st.Op] = o
		}
		o.Calls += st.Calls
		o.Bytes += st.Bytes
		o.TimeNS += st.Time.Sum
		o.WaitNS += st.WaitNS
		o.BusBWGBps += st.BusBWGBps * float64(st.Bytes) // weighted, divided below
		o.MeanNS += float64(st.Time.N)                  // events, divided below
		total += st.Time.Sum
	}
	var opl []OpStats
	for _, o := range ops {
		if o.Bytes > 0 {
			o.BusBWGBps /= float64(o.Bytes)
		} else {
			o.BusBWGBps = 0
		}
		if o.MeanNS > 0 {
			o.MeanNS = float64(o.TimeNS) / o.MeanNS
		}
		if total > 0 {
			o.Share = float64(o.TimeNS) / float64(total)
		}
		opl = append(opl, *o)
	}
	sort.Slice(opl, func(i, j int) bool {
		if opl[i].TimeNS != opl[j].TimeNS {
			return opl[i].TimeNS > opl[j].TimeNS
		}
		return opl[i].Op < opl[j].Op
	})
	return orEmpty(out), orEmpty(opl)
}

// cmpColl orders collective groups by op, algorithm and size bucket.
func cmpColl(a, b CollStats) int {
	return cmp.Or(strings.Compare(a.Op, b.Op), strings.Compare(a.Algo, b.Algo), cmp.Compare(a.Bucket, b.Bucket))
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// dist returns d's distribution, with nearest-rank percentiles. It
// reorders d: the percentiles are selected, not sorted for, since sorting
// the durations of millions of calls was most of Finalize's time.
func dist(d []int64) Dist {
	if len(d) == 0 {
		return Dist{}
	}
	var sum int64
	mx := d[0]
	for _, x := range d {
		sum += x
		mx = max(mx, x)
	}
	rank := func(p float64) int {
		k := int(p*float64(len(d))+0.999999) - 1
		return min(max(k, 0), len(d)-1)
	}
	// Each selection leaves larger values after the selected one, so the
	// next, higher percentile is looked for among those only.
	k50, k95, k99 := rank(0.50), rank(0.95), rank(0.99)
	nth(d, k50)
	nth(d[k50:], k95-k50)
	nth(d[k95:], k99-k95)
	return Dist{N: int64(len(d)), Sum: sum, Mean: float64(sum) / float64(len(d)), P50: d[k50], P95: d[k95], P99: d[k99], Max: mx}
}

// nth reorders d so that d[k] is the value a sorted d would hold there,
// with no larger value before it and no smaller one after (quickselect; it
// falls back to sorting the part left when the partitions stay unbalanced).
func nth(d []int64, k int) {
	lo, hi := 0, len(d)-1
	for budget := 2*bits.Len(uint(len(d))) + 8; hi-lo > 16; budget-- {
		if budget == 0 {
			break
		}
		m := lo + (hi-lo)/2
		if d[m] < d[lo] {
			d[m], d[lo] = d[lo], d[m]
		}
		if d[hi] < d[lo] {
			d[hi], d[lo] = d[lo], d[hi]
		}
		if d[hi] < d[m] {
			d[hi], d[m] = d[m], d[hi]
		}
		p := d[m]
		i, j := lo, hi
		for i <= j {
			for d[i] < p {
				i++
			}
			for d[j] > p {
				j--
			}
			if i <= j {
				d[i], d[j] = d[j], d[i]
				i++
				j--
			}
		}
		// d[lo..j] <= p, d[i..hi] >= p, and anything between equals p.
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
	slices.Sort(d[lo : hi+1])
}

func (s *Summarizer) rankStats(ranks []*RankSummarizer, calls []callRec, inst [][2]int, waits []int64, world int) []RankStats {
	comm := make([][]span, world)
	wait := make([]int64, world)
	perRank := make([]int, world)
	for _, c := range calls {
		perRank[c.rank]++
	}
	for r, n := range perRank {
		comm[r] = make([]span, 0, n)
	}
	for i, c := range calls {
		comm[c.rank] = append(comm[c.rank], span{c.start, c.start + c.dur})
		wait[c.rank] += waits[i]
	}
	for _, rs := range ranks {
		comm[rs.rank] = append(comm[rs.rank], rs.p2p...)
	}
	lastN, late, lateN := lateness(calls, inst, world)
	out := make([]RankStats, 0, len(ranks))
	for _, rs := range ranks {
		r := rs.rank
		cs := union(comm[r])
		ps := union(slices.Clone(rs.compute)) // steps reads rs.compute at the same time
		ov := length(intersect(cs, ps))
		st := RankStats{Rank: r, Host: rs.host, Events: rs.events, ComputeNS: length(ps), CommNS: length(cs), OverlappedNS: ov,
			WaitNS: wait[r], RecvWaitNS: rs.recvWait, SendNS: rs.sendNS, RecvNS: rs.recvNS, BytesSent: rs.bytesSent,
			BytesRecv: rs.bytesRecv, MsgsSent: rs.msgsSent, MsgsRecv: rs.msgsRecv, LastArrivals: lastN[r], Truncated: rs.truncated}
		st.ExposedNS = st.CommNS - ov
		if lateN[r] > 0 {
			st.MeanLateNS = late[r] / float64(lateN[r])
		}
		out = append(out, st)
	}
	return out
}

// lateness counts, per rank, the multi-rank calls it arrived last in and
// sums its arrival minus the mean arrival of the others.
func lateness(calls []callRec, inst [][2]int, world int) (lastN []int64, late []float64, n []int64) {
	lastN, late, n = make([]int64, world), make([]float64, world), make([]int64, world)
	for _, in := range inst {
		k := in[1] - in[0]
		if k < 2 {
			continue
		}
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
			lastN[calls[li].rank]++
		}
		for j := in[0]; j < in[1]; j++ {
			others := (sum - float64(calls[j].start)) / float64(k-1)
			late[calls[j].rank] += float64(calls[j].start) - others
			n[calls[j].rank]++
		}
	}
	return lastN, late, n
}

func (s *Summarizer) matrices(ranks []*RankSummarizer, world int) (Matrix, []Matrix) {
	newM := func(op string) Matrix {
		m := Matrix{Op: op, Bytes: make([][]int64, world), Messages: make([][]int64, world), TimeNS: make([][]int64, world)}
		for i := range world {
			m.Bytes[i], m.Messages[i], m.TimeNS[i] = make([]int64, world), make([]int64, world), make([]int64, world)
		}
		return m
	}
	all := newM("")
	per := map[int32]*Matrix{}
	for _, rs := range ranks {
		for name, acc := range rs.matrices {
			m := per[name]
			if m == nil {
				mm := newM(s.str(name))
				m = &mm
				per[name] = m
			}
			dst := rs.rank
			for src := range acc.bytes {
				if src >= world || dst >= world {
					continue
				}
				m.Bytes[src][dst] += acc.bytes[src]
				m.Messages[src][dst] += acc.msgs[src]
				m.TimeNS[src][dst] += acc.time[src]
				all.Bytes[src][dst] += acc.bytes[src]
				all.Messages[src][dst] += acc.msgs[src]
				all.TimeNS[src][dst] += acc.time[src]
			}
		}
	}
	out := []Matrix{}
	for _, m := range per {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Op < out[j].Op })
	return all, out
}

func (s *Summarizer) messageSizes(ranks []*RankSummarizer) []SizeStats {
	merged := map[sizeKey]*SizeStats{}
	for _, rs := range ranks {
		for k, st := range rs.sizes {
			m := merged[k]
			if m == nil {
				m = &SizeStats{Op: s.str(k.name), Bucket: k.bucket, BucketLbl: BucketLabel(k.bucket)}
				merged[k] = m
			}
			m.Messages += st.Messages
			m.Bytes += st.Bytes
			m.TimeNS += st.TimeNS
			m.WaitNS += st.WaitNS
		}
	}
	out := []SizeStats{}
	for _, m := range merged {
		if t := m.TimeNS - m.WaitNS; t > 0 {
			m.GBps = float64(m.Bytes) / float64(t)
		}
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b SizeStats) int {
		return cmp.Or(strings.Compare(a.Op, b.Op), cmp.Compare(a.Bucket, b.Bucket))
	})
	return out
}

// skewSeriesMax is how many world calls the skew heatmap samples.
const skewSeriesMax = 400

func (s *Summarizer) skew(calls []callRec, inst [][2]int, world int) Skew {
	sk := Skew{Ranking: []int{}, ByOp: []OpSkew{}, Series: SkewSeries{Seq: []int64{}, Op: []string{}, Offset: [][]int64{}}}
	all := make([]int64, 0, len(inst))
	byOp := map[int32][]int64{}
	worldID, hasWorld := s.strIdx["world"]
	var worldInst [][2]int
	for _, in := range inst {
		if in[1]-in[0] < 2 {
			continue
		}
		first, last := calls[in[0]].start, calls[in[0]].start
		for _, c := range calls[in[0]:in[1]] {
			first, last = min(first, c.start), max(last, c.start)
		}
		all = append(all, last-first)
		byOp[calls[in[0]].name] = append(byOp[calls[in[0]].name], last-first)
		if hasWorld && calls[in[0]].comm == worldID {
			worldInst = append(worldInst, in)
		}
	}
	sk.Calls = int64(len(all))
	sk.Dist = dist(all)
	for name, d := range byOp {
		sk.ByOp = append(sk.ByOp, OpSkew{Op: s.str(name), Dist: dist(d)})
	}
	sort.Slice(sk.ByOp, func(i, j int) bool { return sk.ByOp[i].Op < sk.ByOp[j].Op })
	lastN, late, n := lateness(calls, inst, world)
	for r := range world {
		if n[r] > 0 {
			sk.Ranking = append(sk.Ranking, r)
		}
	}
	sort.SliceStable(sk.Ranking, func(i, j int) bool {
		a, b := sk.Ranking[i], sk.Ranking[j]
		if lastN[a] != lastN[b] {
			return lastN[a] > lastN[b]
		}
		return late[a]/float64(n[a]) > late[b]/float64(n[b])
	})
	stride := max(1, (len(worldInst)+skewSeriesMax-1)/skewSeriesMax)
	for i := 0; i < len(worldInst); i += stride {
		in := worldInst[i]
		first := calls[in[0]].start
		for _, c := range calls[in[0]:in[1]] {
			first = min(first, c.start)
		}
		row := make([]int64, world)
		for r := range row {
			row[r] = -1
		}
		for _, c := range calls[in[0]:in[1]] {
			row[c.rank] = c.start - first
		}
		sk.Series.Seq = append(sk.Series.Seq, calls[in[0]].seq)
		sk.Series.Op = append(sk.Series.Op, s.str(calls[in[0]].name))
		sk.Series.Offset = append(sk.Series.Offset, row)
	}
	return sk
}

func (s *Summarizer) computeNames(ranks []*RankSummarizer) []NameTime {
	m := map[int32]*NameTime{}
	for _, rs := range ranks {
		for k, v := range rs.computeNames {
			if m[k] == nil {
				m[k] = &NameTime{Name: s.str(k)}
			}
			m[k].Count += v.Count
			m[k].TimeNS += v.TimeNS
		}
	}
	out := []NameTime{}
	for _, v := range m {
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TimeNS != out[j].TimeNS {
			return out[i].TimeNS > out[j].TimeNS
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// steps breaks each rank's steps into compute, exposed and overlapped
// communication and idle time, then averages each step over its ranks.
func (s *Summarizer) steps(ranks []*RankSummarizer, calls []callRec, waits []int64, samples int) ([]StepStats, StepSummary) {
	type acc struct {
		st    StepStats
		times []int64
	}
	byStep := map[int32]*acc{}
	commOf := map[int32][]span{}
	waitOf := map[int32][]stepWait{}
	perRank := map[int32]int{}
	for _, c := range calls {
		perRank[c.rank]++
	}
	for r, n := range perRank {
		commOf[r] = make([]span, 0, n)
		waitOf[r] = make([]stepWait, 0, n)
	}
	for i, c := range calls {
		commOf[c.rank] = append(commOf[c.rank], span{c.start, c.start + c.dur})
		waitOf[c.rank] = append(waitOf[c.rank], stepWait{c.start, waits[i], c.bytes})
	}
	for _, rs := range ranks {
		commOf[int32(rs.rank)] = append(commOf[int32(rs.rank)], rs.p2p...)
	}
	for _, rs := range ranks {
		if len(rs.steps) == 0 {
			continue
		}
		st := slices.Clone(rs.steps)
		sort.Slice(st, func(i, j int) bool { return st[i].start < st[j].start })
		r := int32(rs.rank)
		cs := union(commOf[r])
		ps := union(slices.Clone(rs.compute))
		ov := intersect(cs, ps)
		ws := waitOf[r]
		sort.Slice(ws, func(i, j int) bool { return ws[i].at < ws[j].at })
		var ci, pi, oi, wi int
		for _, x := range st {
			comm := clipLength(cs, &ci, x.start, x.end)
			comp := clipLength(ps, &pi, x.start, x.end)
			over := clipLength(ov, &oi, x.start, x.end)
			var wsum, bytes int64
			for wi < len(ws) && ws[wi].at < x.start {
				wi++
			}
			for k := wi; k < len(ws) && ws[k].at < x.end; k++ {
				wsum += ws[k].wait
				bytes += ws[k].bytes
			}
			a := byStep[x.step]
			if a == nil {
				a = &acc{st: StepStats{Step: int(x.step), StartNS: x.start}}
				byStep[x.step] = a
			}
			d := x.end - x.start
			a.st.Ranks++
			a.st.StartNS = min(a.st.StartNS, x.start)
			a.st.MaxNS = max(a.st.MaxNS, d)
			a.times = append(a.times, d)
			a.st.TimeNS += float64(d)
			a.st.ComputeNS += float64(comp)
			a.st.ExposedNS += float64(comm - over)
			a.st.OverlappedNS += float64(over)
			a.st.IdleNS += float64(d - comp - (comm - over))
			a.st.WaitNS += float64(wsum)
			a.st.CommBytes += float64(bytes)
		}
	}
	out := []StepStats{}
	var times []int64
	var sum StepSummary
	for _, a := range byStep {
		n := float64(a.st.Ranks)
		st := a.st
		st.TimeNS /= n
		st.ComputeNS /= n
		st.ExposedNS /= n
		st.OverlappedNS /= n
		st.IdleNS /= n
		st.WaitNS /= n
		st.CommBytes /= n
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Step < out[j].Step })
	for _, st := range out { // in step order, for sums that do not change between reads
		times = append(times, int64(st.TimeNS))
		sum.ComputeNS += st.ComputeNS
		sum.ExposedNS += st.ExposedNS
		sum.OverlappedNS += st.OverlappedNS
		sum.IdleNS += st.IdleNS
		sum.WaitNS += st.WaitNS
	}
	sum.Steps = len(out)
	if len(out) > 0 {
		n := float64(len(out))
		sum.ComputeNS /= n
		sum.ExposedNS /= n
		sum.OverlappedNS /= n
		sum.IdleNS /= n
		sum.WaitNS /= n
		sum.Time = dist(times)
		if samples > 0 && sum.Time.Mean > 0 {
			sum.SamplesPerSec = float64(samples) / (sum.Time.Mean / 1e9)
		}
	}
	return out, sum
}

type stepWait struct{ at, wait, bytes int64 }
