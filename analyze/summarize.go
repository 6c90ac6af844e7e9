package analyze

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/commprof/commprof/internal/units"
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

	mu     sync.RWMutex // guards strs, strIdx and ranks: ranks are fed in parallel
	strs   []string
	strIdx map[string]int32
	ranks  map[int]*RankSummarizer
	p2p    int32 // the name of point-to-point messages, which belong to no collective
	direct int32 // the algorithm "direct" (point-to-point collectives, whose patterns are by call)
}

// NewSummarizer starts a summary of a run.
func NewSummarizer(meta Meta) *Summarizer {
	s := &Summarizer{meta: meta, strIdx: map[string]int32{}, ranks: map[int]*RankSummarizer{}}
	s.intern("")
	s.p2p = s.intern(PointToPoint)
	s.direct = s.intern("direct")
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

// str is the string interned as i. Other ranks' goroutines may be
// interning as it reads.
func (s *Summarizer) str(i int32) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.strs[i]
}

// Rank returns the accumulator of rank r's events, creating it. Each
// RankSummarizer must be fed from one goroutine at a time.
func (s *Summarizer) Rank(r int, host string) *RankSummarizer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rs, ok := s.ranks[r]; ok {
		return rs
	}
	rs := &RankSummarizer{s: s, rank: r, host: host, world: max(s.meta.WorldSize, r+1),
		computeNames: map[int32]*NameTime{}, matrices: map[int32]*matrixAcc{}, sizes: map[sizeKey]*SizeStats{}, sendNSTo: map[int32][]int64{},
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

	dicts [4]dictMap // names, algos, comms, labels of the current stream

	events                   int64
	calls                    []callRec
	waits                    []waitRec // the program's waits on non-blocking calls
	p2p                      []span    // point-to-point sends and receives
	p2pMsgs                  []p2pRec  // the same, with their peers, for the replay
	collWaits                []collWaitRec
	reduce                   linReg // reduction kernels: ns against bytes
	selfBytes, selfMsgs      int64  // messages to itself: local copies, not network traffic
	compute                  []span
	computeNames             map[int32]*NameTime
	steps                    []stepRec
	marks                    []Mark
	timed                    []span // the program's timed regions (trace.MarkTimed)
	sendNS, recvNS, recvWait int64
	bytesSent, bytesRecv     int64
	msgsSent, msgsRecv       int64
	first, last              int64
	spanned                  bool // first and last are set: the rank has an event that is not a sample
	res                      resourceAcc
	matrices                 map[int32]*matrixAcc      // by op name; the world matrix is summed at the end
	sendNSTo                 map[int32][]int64         // by op name, then destination below denseRanks: time in sends
	sendFar                  map[int32]map[int32]int64 // the same for destinations from denseRanks on
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
	label            int32 // the user-level name (a tensor), 0 for none
	rank, root       int32
	step             int32
	seq              int64
	start, dur       int64
	bytes            int64
	untimed          bool  // outside the program's timed regions (warm-up, checks)
	region           int32 // the timed region it is in, -1 for none
	nonBlocking      bool  // the program waited on it with a wait event
	// recvWait sums the waits of the call's own messages received on
	// its rank (time posted before the first byte), for the replay.
	recvWait int64
}

type stepRec struct {
	step       int32
	start, end int64
}

// waitRec is the program's wait on a non-blocking call: a collective's,
// which its communicator, name and sequence number name, or a message's
// (name PointToPoint), which its communicator, tag (in seq), peer, bytes
// and end name.
type waitRec struct {
	comm, name int32
	peer       int32
	seq        int64
	bytes      int64
	start, end int64
}

// p2pWaitKey names a point-to-point message and the program's wait on it.
type p2pWaitKey struct {
	comm, peer      int32
	tag, bytes, end int64
}

// p2pRec is one point-to-point message on the program's side.
type p2pRec struct {
	send       bool
	comm       int32
	peer       int32
	tag        int64
	start, end int64
	wait       int64 // recv: before the first byte
	bytes      int64
}

type sizeKey struct {
	name   int32
	bucket int
}

// denseRanks bounds what a rank's traffic accumulators index by peer:
// peers below it are slots of a slice, the rare ones at or above it (a
// world of many thousand ranks, or a damaged run) entries of a map, so
// that no single value read from a stream sizes a slice.
const denseRanks = 1 << 12

// matrixAcc is one op's received traffic on one rank, by source rank.
type matrixAcc struct {
	bytes, msgs, time []int64             // sources below denseRanks
	far               map[int32]*[3]int64 // sources from denseRanks on: bytes, messages, time
}

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

// SummaryColumns returns the trace columns AddBatch reads; a reader need
// not decode the others.
func SummaryColumns() []string {
	return []string{trace.ColKind, trace.ColName, trace.ColStart, trace.ColDur, trace.ColBytes, trace.ColPeer,
		trace.ColSeq, trace.ColStep, trace.ColAlgo, trace.ColRoot, trace.ColComm, trace.ColWait, trace.ColValue, trace.ColLabel}
}

// AddBatch adds one batch of this rank's events; b may be reused after.
func (rs *RankSummarizer) AddBatch(b *trace.Batch) {
	rs.dicts[0].update(rs.s, b.Names)
	rs.dicts[1].update(rs.s, b.Algos)
	rs.dicts[2].update(rs.s, b.Comms)
	rs.dicts[3].update(rs.s, b.Labels)
	names, algos, comms, labels := rs.dicts[0].ids, rs.dicts[1].ids, rs.dicts[2].ids, rs.dicts[3].ids
	rs.events += int64(b.Len)
	for i := 0; i < b.Len; i++ {
		start, dur := b.Start[i], b.Dur[i]
		if b.Kind[i] == trace.KindSample {
			// Readings of counters, not the program's work: they do not
			// stretch the run's span.
			rs.sample(names[b.Name[i]], start, b.Value[i])
			continue
		}
		if !rs.spanned {
			rs.first, rs.last, rs.spanned = start, start, true
		}
		rs.first = min(rs.first, start)
		rs.last = max(rs.last, start+dur)
		switch b.Kind[i] {
		case trace.KindCollective:
			var label int32
			if b.Label != nil {
				label = labels[b.Label[i]]
			}
			rs.calls = append(rs.calls, callRec{comm: comms[b.Comm[i]], name: names[b.Name[i]], algo: algos[b.Algo[i]], label: label,
				rank: int32(rs.rank), root: b.Root[i], step: b.Step[i], seq: b.Seq[i], start: start, dur: dur, bytes: b.Bytes[i], region: -1})
		case trace.KindSend:
			// A message to itself is a local copy, not communication.
			if names[b.Name[i]] == rs.s.p2p && int(b.Peer[i]) != rs.rank {
				rs.p2p = append(rs.p2p, span{start, start + dur})
				rs.p2pMsgs = append(rs.p2pMsgs, p2pRec{send: true, comm: comms[b.Comm[i]], peer: b.Peer[i], tag: b.Seq[i], start: start, end: start + dur,
					bytes: b.Bytes[i]})
			}
			if int(b.Peer[i]) == rs.rank {
				// A message to itself is a local copy (a parameter
				// server's own shard): not network traffic.
				rs.selfBytes += b.Bytes[i]
				rs.selfMsgs++
				break
			}
			rs.sendNS += dur
			rs.bytesSent += b.Bytes[i]
			rs.msgsSent++
			if p := b.Peer[i]; p >= 0 {
				rs.world = max(rs.world, int(p)+1)
				name := names[b.Name[i]]
				if p < denseRanks {
					st := rs.sendNSTo[name]
					if len(st) <= int(p) {
						st = append(st, make([]int64, int(p)+1-len(st))...)
					}
					st[p] += dur
					rs.sendNSTo[name] = st
				} else {
					if rs.sendFar == nil {
						rs.sendFar = map[int32]map[int32]int64{}
					}
					if rs.sendFar[name] == nil {
						rs.sendFar[name] = map[int32]int64{}
					}
					rs.sendFar[name][p] += dur
				}
			}
			rs.pattern(comms[b.Comm[i]], names[b.Name[i]], algos[b.Algo[i]], b.Seq[i], b.Peer[i])
		case trace.KindRecv:
			if names[b.Name[i]] == rs.s.p2p && int(b.Peer[i]) != rs.rank {
				rs.p2p = append(rs.p2p, span{start, start + dur})
				rs.p2pMsgs = append(rs.p2pMsgs, p2pRec{comm: comms[b.Comm[i]], peer: b.Peer[i], tag: b.Seq[i], start: start, end: start + dur,
					wait: b.Wait[i], bytes: b.Bytes[i]})
			}
			rs.recv(names[b.Name[i]], b.Peer[i], b.Bytes[i], dur, b.Wait[i])
			if names[b.Name[i]] != rs.s.p2p && int(b.Peer[i]) != rs.rank && b.Wait[i] > 0 {
				rs.collWait(comms[b.Comm[i]], b.Seq[i], b.Wait[i])
			}
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
		case trace.KindWait:
			rs.waits = append(rs.waits, waitRec{comm: comms[b.Comm[i]], name: names[b.Name[i]], peer: b.Peer[i], seq: b.Seq[i],
				bytes: b.Bytes[i], start: start, end: start + dur})
		case trace.KindReduce:
			rs.reduce.add(float64(b.Bytes[i]), float64(dur))
		case trace.KindMark:
			rs.marks = append(rs.marks, Mark{Rank: rs.rank, Name: b.Names[b.Name[i]], AtNS: start, Step: int(b.Step[i]), Value: trace.Number(b.Value[i])})
		}
	}
}

// collWaitRec sums the waits of a collective's messages received on a
// rank; a call's messages mostly come one after another, so they add to
// the last record.
type collWaitRec struct {
	comm int32
	seq  int64
	wait int64
}

func (rs *RankSummarizer) collWait(comm int32, seq, wait int64) {
	if n := len(rs.collWaits); n > 0 && rs.collWaits[n-1].comm == comm && rs.collWaits[n-1].seq == seq {
		rs.collWaits[n-1].wait += wait
		return
	}
	rs.collWaits = append(rs.collWaits, collWaitRec{comm, seq, wait})
}

// attachWaits adds each call's message waits to it; rs.calls is sorted
// by (comm, seq).
func (rs *RankSummarizer) attachWaits() {
	ws := rs.collWaits
	slices.SortFunc(ws, func(a, b collWaitRec) int {
		if c := cmp.Compare(a.comm, b.comm); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	j := 0
	for i := range rs.calls {
		c := &rs.calls[i]
		for j < len(ws) && (ws[j].comm < c.comm || ws[j].comm == c.comm && ws[j].seq < c.seq) {
			j++
		}
		for k := j; k < len(ws) && ws[k].comm == c.comm && ws[k].seq == c.seq; k++ {
			c.recvWait += ws[k].wait
		}
	}
	rs.collWaits = nil
}

func (rs *RankSummarizer) recv(name, peer int32, bytes, dur, wait int64) {
	if int(peer) == rs.rank {
		return // counted as local on the send side
	}
	rs.recvNS += dur
	rs.recvWait += wait
	rs.bytesRecv += bytes
	rs.msgsRecv++
	if peer >= 0 {
		rs.world = max(rs.world, int(peer)+1)
		m := rs.lastMatrix
		if m == nil || rs.lastMatrixName != name {
			m = rs.matrices[name]
			if m == nil {
				m = &matrixAcc{}
				rs.matrices[name] = m
			}
			rs.lastMatrix, rs.lastMatrixName = m, name
		}
		switch {
		case peer >= denseRanks:
			if m.far == nil {
				m.far = map[int32]*[3]int64{}
			}
			c := m.far[peer]
			if c == nil {
				c = new([3]int64)
				m.far[peer] = c
			}
			c[0] += bytes
			c[1]++
			c[2] += dur
		default:
			if n := int(peer) + 1; len(m.bytes) < n {
				m.bytes = append(m.bytes, make([]int64, n-len(m.bytes))...)
				m.msgs = append(m.msgs, make([]int64, n-len(m.msgs))...)
				m.time = append(m.time, make([]int64, n-len(m.time))...)
			}
			m.bytes[peer] += bytes
			m.msgs[peer]++
			m.time[peer] += dur
		}
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
	rows := 0 // per-rank tables are indexed by the ranks that have streams
	for _, rs := range ranks {
		world = max(world, rs.world, rs.rank+1)
		rows = max(rows, rs.rank+1)
	}
	sum.Run = s.runInfo(ranks, world)
	ext, far := s.extent(ranks)
	sum.Problems = append(sum.Problems, far...)

	s.classifyCalls(ranks)
	calls := s.mergeCalls(ranks)
	inst := instances(calls)
	waits := arrivalWaits(calls, inst, world)
	sp := s.spans(ranks, calls, rows)
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
	par(func() { sum.Collectives, sum.Ops = s.collStats(ranks, calls, inst, waits) })
	par(func() { sum.Ranks = s.rankStats(ranks, calls, inst, waits, sp, rows) })
	par(func() {
		sum.Matrix, sum.OpMatrices = s.matrices(ranks, ext)
		sum.MessageSizes = s.messageSizes(ranks)
		sum.Compute = s.computeNames(ranks)
		sum.Patterns = s.patterns(ranks, calls)
	})
	par(func() { sum.Skew = s.skew(calls, inst, rows, ext) })
	par(func() { sum.Steps, sum.StepSummary = s.steps(ranks, calls, waits, sp, sum.Run.SamplesPerStep) })
	par(func() { sum.fitAcc = s.fitSums(ranks, calls, inst, waits) })
	par(func() { sum.Stragglers = s.stragglers(ranks, calls, inst) })
	wg.Wait()
	sum.Resources = s.resources(ranks, sum.Ranks, sum.Steps, sum.Run.SamplesPerStep)
	sum.PointToPoint = pointToPoint(ranks, sp, sum.StepSummary.Steps)
	labelPatterns(sum)
	for _, rs := range ranks {
		sum.Marks = append(sum.Marks, rs.marks...)
	}
	sort.SliceStable(sum.Marks, func(i, j int) bool { return sum.Marks[i].AtNS < sum.Marks[j].AtNS })
	sum.Epochs = epochs(sum.Marks, sum.Steps, sum.Run.FirstNS, sum.Run.SamplesPerStep)
	sum.Fit = sum.fitAcc.solve()
	sum.stepCalls = s.stepCalls(calls, inst, waits, len(sum.Steps))
	sum.Projection = sum.Project(DefaultProjectionRanks(world), nil)
	if src := sum.Run.Source; src != nil && src.ToolPhases {
		sum.forgetProgramWork()
	}
	if src := sum.Run.Source; src != nil && src.Format == "pmpi" {
		// The PMPI library sees the program's MPI calls, not its compute
		// between them, nor when a message arrived within a receive (its
		// wait before the first byte reads 0).
		sum.Unknown = append(sum.Unknown, "compute", "recv_wait")
		// Nor, then, a hub's bandwidth while receiving: its receives'
		// time includes waiting for the senders.
		for i := range sum.PointToPoint.Hubs {
			sum.PointToPoint.Hubs[i].GBps = 0
		}
	}
	if src := sum.Run.Source; src != nil && (src.Untimed || src.NoDurations) {
		sum.forgetTimes(!src.Untimed)
	}
	if src := sum.Run.Source; src != nil && src.PartialRanks {
		sum.unknown("communication")
	}
	sum.Headline = headline(sum)
	sum.Findings = findings(sum)
	return sum
}

func (s *Summarizer) runInfo(ranks []*RankSummarizer, world int) RunInfo {
	ri := RunInfo{Dir: s.meta.Dir, WorldSize: world, Ranks: len(ranks), DiskBytes: s.meta.DiskBytes,
		Config: map[string]string{}, Metrics: map[string]float64{}, Hosts: []string{}, Command: []string{},
		Injected: []string{}, Contention: s.contention()}
	first, last := int64(0), int64(0)
	seen := false
	for _, rs := range ranks {
		ri.Events += rs.events
		if !rs.spanned {
			continue
		}
		if !seen || rs.first < first {
			seen = true
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
		ri.Source = m.Source
		ri.Injected = append(ri.Injected, m.Injected...)
	}
	if bs, err := strconv.Atoi(ri.Config["batch_size"]); err == nil && bs > 0 {
		ri.SamplesPerStep = bs * world
	}
	return ri
}

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

// busFactor is the nccl-tests factor from algbw to busbw on n ranks,
// extended to the MPI collectives a PMPI recording names: the vector and
// rooted forms move (n-1)/n of their buffer as their regular forms do.
func busFactor(op string, n int) float64 {
	if n < 1 {
		return 1
	}
	switch op {
	case "allreduce":
		return 2 * float64(n-1) / float64(n)
	case "allgather", "allgatherv", "reducescatter", "reducescatterv", "alltoall", "alltoallv", "alltoallw",
		"gather", "gatherv", "scatter", "scatterv":
		return float64(n-1) / float64(n)
	}
	return 1
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

type collKey struct {
	name, algo int32
	bucket     int
}

// benchTimes returns, per collective group, the time per call as a
// benchmark measures it (nccl-tests, commprof bench): each rank's timed
// loops' length over the calls in them, the slowest rank's. Groups whose
// calls share a timed loop with other groups' are left out.
func benchTimes(ranks []*RankSummarizer, calls []callRec) map[collKey]float64 {
	type rr struct{ rank, region int32 }
	type acc struct {
		key   collKey
		n     int64
		mixed bool
	}
	regions := map[rr]*acc{}
	for _, c := range calls {
		if c.region < 0 {
			continue
		}
		k := collKey{c.name, c.algo, SizeBucket(c.bytes)}
		a := regions[rr{c.rank, c.region}]
		if a == nil {
			regions[rr{c.rank, c.region}] = &acc{key: k, n: 1}
			continue
		}
		a.mixed = a.mixed || a.key != k
		a.n++
	}
	if len(regions) == 0 {
		return nil
	}
	timed := map[int32][]span{}
	for _, rs := range ranks {
		timed[int32(rs.rank)] = rs.timed
	}
	type sums struct{ span, n int64 }
	per := map[collKey]map[int32]*sums{}
	bad := map[collKey]bool{}
	for key, a := range regions {
		if a.mixed {
			bad[a.key] = true
			continue
		}
		g := timed[key.rank][key.region]
		if per[a.key] == nil {
			per[a.key] = map[int32]*sums{}
		}
		x := per[a.key][key.rank]
		if x == nil {
			x = &sums{}
			per[a.key][key.rank] = x
		}
		x.span += g.hi - g.lo
		x.n += a.n
	}
	out := map[collKey]float64{}
	for k, m := range per {
		if bad[k] {
			continue
		}
		var worst float64
		for _, x := range m {
			worst = max(worst, float64(x.span)/float64(x.n))
		}
		out[k] = worst
	}
	return out
}

func (s *Summarizer) collStats(ranks []*RankSummarizer, calls []callRec, inst [][2]int, waits []int64) ([]CollStats, []OpStats) {
	type acc struct {
		st       CollStats
		durs     []int64
		perCall  []float64 // each call's mean time over its ranks, in call order
		transfer float64
		ranksN   map[int]int
		commN    int // the largest communicator the group's calls ran on
	}
	worldID, hasWorld := s.strIdx["world"]
	sizes := commSizes(calls, inst, worldID, hasWorld, s.meta.WorldSize)
	bench := benchTimes(ranks, calls)
	groups := map[collKey]*acc{}
	for _, in := range inst {
		if untimed(calls, in) {
			continue
		}
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
		a.commN = max(a.commN, sizes[c0.comm])
		last := calls[in[0]].start
		for _, c := range calls[in[0]:in[1]] {
			last = max(last, c.start)
		}
		var callSum int64
		for j := in[0]; j < in[1]; j++ {
			c := calls[j]
			callSum += c.dur
			a.durs = append(a.durs, c.dur)
			a.st.WaitNS += waits[j]
			a.transfer += float64(max(c.start+c.dur-max(last, c.start), 0))
		}
		a.perCall = append(a.perCall, float64(callSum)/float64(in[1]-in[0]))
	}
	var out []CollStats
	ops := map[string]*OpStats{}
	var total int64
	for k, a := range groups {
		st := a.st
		st.Op, st.Algo, st.Bucket, st.BucketLbl = s.str(k.name), s.str(k.algo), k.bucket, units.Bucket(k.bucket)
		best := 0
		for n, c := range a.ranksN {
			if c > a.ranksN[best] || (c == a.ranksN[best] && n > best) {
				best = n
			}
		}
		st.Ranks = max(best, a.commN)
		// The ranks' events of one call are not independent samples (one
		// hiccup delays them all): the blocks are of calls.
		st.TimeSpread = BlockSpread(a.perCall)
		st.Time = dist(a.durs)
		if st.Time.Mean > 0 && st.Calls > 0 {
			st.AlgBWGBps = float64(st.Bytes) / float64(st.Calls) / st.Time.Mean
			st.BusBWGBps = st.AlgBWGBps * busFactor(st.Op, st.Ranks)
		}
		if st.Time.N > 0 {
			st.TransferNS = a.transfer / float64(st.Time.N)
		}
		if st.TransferNS > 0 && st.Calls > 0 {
			st.TransferBusBWGBps = float64(st.Bytes) / float64(st.Calls) / st.TransferNS * busFactor(st.Op, st.Ranks)
		}
		if t := bench[k]; t > 0 && st.Calls > 0 {
			// A benchmark's timed loop: as it measures itself.
			st.AlgBWGBps = float64(st.Bytes) / float64(st.Calls) / t
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
		o.TransferBusBWGBps += st.TransferBusBWGBps * float64(st.Bytes)
		o.MeanNS += float64(st.Time.N) // events, divided below
		total += st.Time.Sum
	}
	var opl []OpStats
	for _, o := range ops {
		if o.Bytes > 0 {
			o.BusBWGBps /= float64(o.Bytes)
			o.TransferBusBWGBps /= float64(o.Bytes)
		} else {
			o.BusBWGBps, o.TransferBusBWGBps = 0, 0
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

// rankSpans is one rank's time in communication: comm is when a
// collective or point-to-point call was in flight, exposed the part of it
// the program was blocked on (a blocking call, or its wait on a
// non-blocking one); the rest of comm ran behind the program's work.
type rankSpans struct {
	comm, exposed, compute []span
}

// spans computes every rank's rankSpans. A run recorded before wait
// events existed has no way to tell when its program was blocked: there,
// as then, the communication not covered by compute spans is exposed.
// A point-to-point message the program waited for (Isend, Irecv) blocked
// it only while it waited; another (Send, Recv) for its whole span.
func (s *Summarizer) spans(ranks []*RankSummarizer, calls []callRec, world int) []rankSpans {
	haveWaits := false
	for _, rs := range ranks {
		haveWaits = haveWaits || len(rs.waits) > 0
	}
	comm := make([][]span, world)
	blocked := make([][]span, world)
	for _, c := range calls {
		sp := span{c.start, c.start + c.dur}
		comm[c.rank] = append(comm[c.rank], sp)
		if !c.nonBlocking {
			blocked[c.rank] = append(blocked[c.rank], sp)
		}
	}
	out := make([]rankSpans, world)
	for _, rs := range ranks {
		r := rs.rank
		comm[r] = append(comm[r], rs.p2p...)
		cs := union(comm[r])
		ps := union(slices.Clone(rs.compute))
		var ex []span
		if haveWaits {
			bl := blocked[r]
			waited := map[p2pWaitKey]int{}
			for _, w := range rs.waits {
				bl = append(bl, span{w.start, w.end})
				if w.name == s.p2p {
					waited[p2pWaitKey{w.comm, w.peer, w.seq, w.bytes, w.end}]++
				}
			}
			for i, m := range rs.p2pMsgs {
				if k := (p2pWaitKey{m.comm, m.peer, m.tag, m.bytes, m.end}); waited[k] > 0 {
					waited[k]--
					continue
				}
				bl = append(bl, rs.p2p[i])
			}
			ex = intersect(cs, union(bl))
		} else {
			ex = subtract(cs, intersect(cs, ps))
		}
		out[r] = rankSpans{comm: cs, exposed: ex, compute: ps}
	}
	return out
}

func (s *Summarizer) rankStats(ranks []*RankSummarizer, calls []callRec, inst [][2]int, waits []int64, sp []rankSpans, world int) []RankStats {
	wait := rankWaits(calls, waits, world)
	var shared [][]span // per rank: its calls that other ranks hold too
	if m := s.meta.Manifest; m != nil && m.Source != nil && m.Source.PartialRanks {
		shared = sharedCalls(calls, inst, world)
	}
	lastN, late, lateN := lateness(calls, inst, world)
	out := make([]RankStats, 0, len(ranks))
	for _, rs := range ranks {
		r := rs.rank
		x := sp[r]
		st := RankStats{Rank: r, Host: rs.host, Events: rs.events, ComputeNS: length(x.compute), CommNS: length(x.comm),
			ExposedNS: length(x.exposed), WaitNS: wait[r], RecvWaitNS: rs.recvWait, SendNS: rs.sendNS, RecvNS: rs.recvNS,
			BytesSent: rs.bytesSent, BytesRecv: rs.bytesRecv, MsgsSent: rs.msgsSent, MsgsRecv: rs.msgsRecv,
			LocalBytes: rs.selfBytes, LocalMsgs: rs.selfMsgs, LastArrivals: lastN[r], Truncated: rs.truncated}
		if shared != nil {
			// Ranks hold different calls: what each spent in the calls
			// several ranks hold, so that the ranks compare.
			sh := union(shared[r])
			st.CommNS, st.ExposedNS = length(sh), length(intersect(sh, x.exposed))
		}
		st.OverlappedNS = st.CommNS - st.ExposedNS
		if lateN[r] > 0 {
			st.MeanLateNS = late[r] / float64(lateN[r])
		}
		out = append(out, st)
	}
	return out
}

// rankWaits is each rank's time waiting for the last rank to arrive: the
// union of its waits, since calls that overlap on a rank (non-blocking
// ones, Horovod's concurrent negotiations) wait at the same time.
func rankWaits(calls []callRec, waits []int64, world int) []int64 {
	per := make([][]span, world)
	for i, c := range calls {
		if waits[i] > 0 {
			per[c.rank] = append(per[c.rank], span{c.start, c.start + waits[i]})
		}
	}
	out := make([]int64, world)
	for r, sp := range per {
		out[r] = length(union(sp))
	}
	return out
}

// sharedCalls returns, per rank, the spans of its calls that at least one
// other rank holds too.
func sharedCalls(calls []callRec, inst [][2]int, world int) [][]span {
	out := make([][]span, world)
	for _, in := range inst {
		if in[1]-in[0] < 2 {
			continue
		}
		for _, c := range calls[in[0]:in[1]] {
			out[c.rank] = append(out[c.rank], span{c.start, c.start + c.dur})
		}
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

// matrices sums the ranks' traffic into n × n matrices, overall and per
// op; ranks from n on are left out (see extent).
func (s *Summarizer) matrices(ranks []*RankSummarizer, n int) (Matrix, []Matrix) {
	newM := func(op string) Matrix {
		m := Matrix{Op: op, Bytes: make([][]int64, n), Messages: make([][]int64, n), TimeNS: make([][]int64, n), SendNS: make([][]int64, n)}
		for i := range n {
			m.Bytes[i], m.Messages[i], m.TimeNS[i], m.SendNS[i] = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		}
		return m
	}
	all := newM("")
	per := map[int32]*Matrix{}
	opM := func(name int32) *Matrix {
		m := per[name]
		if m == nil {
			mm := newM(s.str(name))
			m = &mm
			per[name] = m
		}
		return m
	}
	for _, rs := range ranks {
		src := rs.rank
		addSend := func(m *Matrix, dst int, ns int64) {
			if src < n && dst < n {
				m.SendNS[src][dst] += ns
				all.SendNS[src][dst] += ns
			}
		}
		for name, st := range rs.sendNSTo {
			m := opM(name)
			for dst, ns := range st {
				addSend(m, dst, ns)
			}
		}
		for name, far := range rs.sendFar {
			m := opM(name)
			for dst, ns := range far {
				addSend(m, int(dst), ns)
			}
		}
		dst := rs.rank
		for name, acc := range rs.matrices {
			m := opM(name)
			add := func(src int, bytes, msgs, ns int64) {
				if src >= n || dst >= n {
					return
				}
				m.Bytes[src][dst] += bytes
				m.Messages[src][dst] += msgs
				m.TimeNS[src][dst] += ns
				all.Bytes[src][dst] += bytes
				all.Messages[src][dst] += msgs
				all.TimeNS[src][dst] += ns
			}
			for src := range acc.bytes {
				add(src, acc.bytes[src], acc.msgs[src], acc.time[src])
			}
			for src, c := range acc.far {
				add(int(src), c[0], c[1], c[2])
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
				m = &SizeStats{Op: s.str(k.name), Bucket: k.bucket, BucketLbl: units.Bucket(k.bucket)}
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

// skew measures arrival skew; rows is one more than the highest rank
// with a stream, n the extent of the sampled series' rows (see extent).
func (s *Summarizer) skew(calls []callRec, inst [][2]int, rows, n int) Skew {
	sk := Skew{Ranking: []int{}, ByOp: []OpSkew{}, Series: SkewSeries{Seq: []int64{}, Op: []string{}, Label: []string{}, Offset: [][]int64{}}}
	all := make([]int64, 0, len(inst))
	byOp := map[int32][]int64{}
	worldID, hasWorld := s.strIdx["world"]
	var worldInst [][2]int
	for _, in := range inst {
		if in[1]-in[0] < 2 || untimed(calls, in) {
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
	sk.ByLabel, sk.LabelSeries = s.labelSkew(calls, inst)
	for name, d := range byOp {
		sk.ByOp = append(sk.ByOp, OpSkew{Op: s.str(name), Dist: dist(d)})
	}
	sort.Slice(sk.ByOp, func(i, j int) bool { return sk.ByOp[i].Op < sk.ByOp[j].Op })
	lastN, late, cnt := lateness(calls, inst, rows)
	for r := range rows {
		if cnt[r] > 0 {
			sk.Ranking = append(sk.Ranking, r)
		}
	}
	sort.SliceStable(sk.Ranking, func(i, j int) bool {
		a, b := sk.Ranking[i], sk.Ranking[j]
		if lastN[a] != lastN[b] {
			return lastN[a] > lastN[b]
		}
		return late[a]/float64(cnt[a]) > late[b]/float64(cnt[b])
	})
	stride := max(1, (len(worldInst)+skewSeriesMax-1)/skewSeriesMax)
	for i := 0; i < len(worldInst); i += stride {
		in := worldInst[i]
		first := calls[in[0]].start
		for _, c := range calls[in[0]:in[1]] {
			first = min(first, c.start)
		}
		row := make([]int64, n)
		for r := range row {
			row[r] = -1
		}
		for _, c := range calls[in[0]:in[1]] {
			if int(c.rank) < n {
				row[c.rank] = c.start - first
			}
		}
		sk.Series.Seq = append(sk.Series.Seq, calls[in[0]].seq)
		sk.Series.Op = append(sk.Series.Op, s.str(calls[in[0]].name))
		sk.Series.Label = append(sk.Series.Label, s.str(calls[in[0]].label))
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
func (s *Summarizer) steps(ranks []*RankSummarizer, calls []callRec, waits []int64, sp []rankSpans, samples int) ([]StepStats, StepSummary) {
	type acc struct {
		st    StepStats
		times []int64
	}
	byStep := map[int32]*acc{}
	waitOf := map[int32][]stepWait{}
	perRank := map[int32]int{}
	for _, c := range calls {
		perRank[c.rank]++
	}
	for r, n := range perRank {
		waitOf[r] = make([]stepWait, 0, n)
	}
	for i, c := range calls {
		waitOf[c.rank] = append(waitOf[c.rank], stepWait{c.start, waits[i], c.bytes})
	}
	for _, rs := range ranks {
		if len(rs.steps) == 0 {
			continue
		}
		st := slices.Clone(rs.steps)
		sort.Slice(st, func(i, j int) bool { return st[i].start < st[j].start })
		r := int32(rs.rank)
		cs, ps, ex := sp[r].comm, sp[r].compute, sp[r].exposed
		ws := waitOf[r]
		sort.Slice(ws, func(i, j int) bool { return ws[i].at < ws[j].at })
		var ci, pi, ei, wi int
		for _, x := range st {
			comm := clipLength(cs, &ci, x.start, x.end)
			comp := clipLength(ps, &pi, x.start, x.end)
			exposed := clipLength(ex, &ei, x.start, x.end)
			over := comm - exposed
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
			a.st.ExposedNS += float64(exposed)
			a.st.OverlappedNS += float64(over)
			a.st.IdleNS += float64(max(d-comp-exposed, 0))
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

// labelSkew is arrival skew per label (tensor), and every labelled call
// over time.
func (s *Summarizer) labelSkew(calls []callRec, inst [][2]int) ([]LabelSkew, LabelSeries) {
	type acc struct {
		st    LabelSkew
		skews []int64
		last  map[int]*LastRank
	}
	by := map[int32]*acc{}
	type point struct {
		at, skew int64
		label    int32
		last     int
	}
	var pts []point
	for _, in := range inst {
		c0 := calls[in[0]]
		if in[1]-in[0] < 2 || c0.label == 0 || untimed(calls, in) {
			continue
		}
		first, last, next, who := c0.start, int64(-1<<62), int64(-1<<62), -1
		var wait int64
		for _, c := range calls[in[0]:in[1]] {
			first = min(first, c.start)
			switch {
			case c.start > last:
				next, last, who = last, c.start, int(c.rank)
			case c.start > next:
				next = c.start
			}
		}
		for _, c := range calls[in[0]:in[1]] {
			wait += min(last-c.start, c.dur)
		}
		a := by[c0.label]
		if a == nil {
			a = &acc{st: LabelSkew{Label: s.str(c0.label), Op: s.str(c0.name)}, last: map[int]*LastRank{}}
			by[c0.label] = a
		}
		a.st.Calls++
		a.st.Bytes = max(a.st.Bytes, c0.bytes)
		a.st.WaitNS += wait
		a.skews = append(a.skews, last-first)
		if last > first && who >= 0 {
			lr := a.last[who]
			if lr == nil {
				lr = &LastRank{Rank: who}
				a.last[who] = lr
			}
			lr.Calls++
			lr.LateNS += last - next
		}
		pts = append(pts, point{first, last - first, c0.label, who})
	}
	out := []LabelSkew{}
	for _, a := range by {
		a.st.Dist = dist(a.skews)
		for _, lr := range a.last {
			a.st.Last = append(a.st.Last, *lr)
		}
		slices.SortFunc(a.st.Last, func(x, y LastRank) int { return cmp.Or(cmp.Compare(y.LateNS, x.LateNS), cmp.Compare(x.Rank, y.Rank)) })
		a.st.Last = orEmpty(a.st.Last)
		out = append(out, a.st)
	}
	slices.SortFunc(out, func(x, y LabelSkew) int {
		return cmp.Or(cmp.Compare(y.WaitNS, x.WaitNS), strings.Compare(x.Label, y.Label))
	})
	if len(out) > 200 {
		out = out[:200]
	}
	slices.SortFunc(pts, func(x, y point) int { return cmp.Compare(x.at, y.at) })
	ser := LabelSeries{AtNS: []int64{}, Label: []string{}, SkewNS: []int64{}, Last: []int{}}
	stride := max(1, (len(pts)+1999)/2000)
	for i := 0; i < len(pts); i += stride {
		p := pts[i]
		ser.AtNS = append(ser.AtNS, p.at)
		ser.Label = append(ser.Label, s.str(p.label))
		ser.SkewNS = append(ser.SkewNS, p.skew)
		ser.Last = append(ser.Last, p.last)
	}
	return out, ser
}
