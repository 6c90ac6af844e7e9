package analyze

import (
	"cmp"
	"slices"

	"github.com/commprof/commprof/trace"
)

// A rank's events as they are read: what each RankSummarizer keeps of them
// for Finalize.

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
	rs.calls.spill = s.spill
	rs.msgs.log.sp, rs.waits.log.sp = s.spill, s.spill
	rs.msgSpans.sp, rs.compute.sp = s.spill, s.spill
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
	calls                    callLog
	waits                    waitLog            // the program's waits on non-blocking calls
	msgs                     msgLog             // its point-to-point messages, with their peers, for the replay
	msgSpans                 spanUnion          // their spans
	pending                  map[[2]int64]int64 // (comm, seq) -> message waits of a call not yet read
	waited                   map[callKey]bool   // waits on collectives not just read (nil: none)
	held                     callRec            // the last call read, not yet packed
	holding                  bool
	reduce                   linReg // reduction kernels: ns against bytes
	selfBytes, selfMsgs      int64  // messages to itself: local copies, not network traffic
	compute                  spanUnion
	computeNames             map[int32]*NameTime
	steps                    []stepRec
	marks                    []Mark
	timed                    []span // the program's timed regions (trace.MarkTimed)
	sendNS, recvNS, recvWait int64
	bytesSent, bytesRecv     int64
	msgsSent, msgsRecv       int64
	first, last              int64
	p2pSeq, computeSeq       *spanSeq // msgSpans' and compute's, once read
	spanned                  bool     // first and last are set: the rank has an event that is not a sample
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

// callRec is one rank's event of one collective call. Its fields are
// laid out to pack into 72 bytes: a run holds one per rank and call.
type callRec struct {
	comm, name, algo int32
	label            int32 // the user-level name (a tensor), 0 for none
	rank, root       int32
	step             int32
	seq              int64
	start, dur       int64
	bytes            int64
	// recvWait sums the waits of the call's own messages received on
	// its rank (time posted before the first byte), for the replay.
	recvWait    int64
	untimed     bool // outside the program's timed regions (warm-up, checks)
	nonBlocking bool // the program waited on it with a wait event
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
	waited     bool // a wait of the program's completed it (Isend, Irecv)
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
// peers below it are slots of a slice, those at or above it entries of a
// map, so that no single value read from a stream sizes a slice, and a
// wide run's ranks, each of which talks to a few of thousands of peers,
// do not each hold a slot per peer: at 4,096 ranks, slices up to 4,096
// took 900 MB of `stats`, up to 256 none of its time (a rank of a
// 512-rank run summarized as fast either way).
const denseRanks = 1 << 8

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
			c := callRec{comm: comms[b.Comm[i]], name: names[b.Name[i]], algo: algos[b.Algo[i]], label: label,
				rank: int32(rs.rank), root: b.Root[i], step: b.Step[i], seq: b.Seq[i], start: start, dur: dur, bytes: b.Bytes[i]}
			// The call's messages come after its event (commprof's own
			// calls) or before it (their waits summed in pending): the
			// last call is held unpacked until the next, for those after.
			if k := [2]int64{int64(c.comm), c.seq}; len(rs.pending) > 0 {
				if w, ok := rs.pending[k]; ok {
					c.recvWait = w
					delete(rs.pending, k)
				}
			}
			if rs.holding {
				rs.calls.add(rs.held)
			}
			rs.held, rs.holding = c, true
		case trace.KindSend:
			// A message to itself is a local copy, not communication.
			if names[b.Name[i]] == rs.s.p2p && int(b.Peer[i]) != rs.rank {
				rs.msgs.add(p2pRec{send: true, comm: comms[b.Comm[i]], peer: b.Peer[i], tag: b.Seq[i], start: start, end: start + dur,
					bytes: b.Bytes[i]})
				rs.msgSpans.add(span{start, start + dur})
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
				rs.msgs.add(p2pRec{comm: comms[b.Comm[i]], peer: b.Peer[i], tag: b.Seq[i], start: start, end: start + dur,
					wait: b.Wait[i], bytes: b.Bytes[i]})
				rs.msgSpans.add(span{start, start + dur})
			}
			rs.recv(names[b.Name[i]], b.Peer[i], b.Bytes[i], dur, b.Wait[i])
			if names[b.Name[i]] != rs.s.p2p && int(b.Peer[i]) != rs.rank && b.Wait[i] > 0 {
				rs.collWait(comms[b.Comm[i]], b.Seq[i], b.Wait[i])
			}
		case trace.KindCompute:
			rs.compute.add(span{start, start + dur})
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
			w := waitRec{comm: comms[b.Comm[i]], name: names[b.Name[i]], peer: b.Peer[i], seq: b.Seq[i],
				bytes: b.Bytes[i], start: start, end: start + dur}
			rs.waits.add(w)
			switch {
			case w.name == rs.s.p2p:
				rs.msgs.wait(p2pWaitKey{w.comm, w.peer, w.seq, w.bytes, w.end})
			case rs.holding && w.seq >= 0 && rs.held.comm == w.comm && rs.held.name == w.name && rs.held.seq == w.seq:
				// The wait on the call just read (the PMPI library writes
				// a completed request's call, then the program's wait).
				rs.held.nonBlocking = true
			default:
				// Kept aside: every call of its key is marked at the merge.
				if rs.waited == nil {
					rs.waited = map[callKey]bool{}
				}
				rs.waited[callKey{w.comm, w.name, w.seq}] = true
			}
		case trace.KindReduce:
			rs.reduce.add(float64(b.Bytes[i]), float64(dur))
		case trace.KindMark:
			rs.marks = append(rs.marks, Mark{Rank: rs.rank, Name: b.Names[b.Name[i]], AtNS: start, Step: int(b.Step[i]), Value: trace.Number(b.Value[i])})
		}
	}
}

// collWaitRec is the summed waits of a collective's messages received on
// a rank.
type collWaitRec struct {
	comm int32
	seq  int64
	wait int64
}

// collWait adds a collective's message wait to its call, which is mostly
// read after its messages: the waits are summed in pending until it is.
func (rs *RankSummarizer) collWait(comm int32, seq, wait int64) {
	if rs.holding && rs.held.comm == comm && rs.held.seq == seq {
		rs.held.recvWait += wait
		return
	}
	if rs.pending == nil {
		rs.pending = map[[2]int64]int64{}
	}
	rs.pending[[2]int64{int64(comm), seq}] += wait
}

// flushCalls packs the call held for its messages' waits.
func (rs *RankSummarizer) flushCalls() {
	if rs.holding {
		rs.calls.add(rs.held)
		rs.holding = false
	}
}

// settle finishes what was read as it came, before the analyses read
// it side by side: the calls held for their waits, the message waits
// that found no message as they came, the spans merged.
func (rs *RankSummarizer) settle() {
	rs.flushCalls()
	rs.msgs.settle()
	rs.p2pSeq, rs.computeSeq = rs.msgSpans.seq(), rs.compute.seq()
}

// lateWaits returns the message waits no call of the rank's took as it
// was read (its event came before its messages, or it has none), sorted
// by (comm, seq), communicators in ord's order.
func (rs *RankSummarizer) lateWaits(ord []int32) []collWaitRec {
	rs.flushCalls()
	ws := make([]collWaitRec, 0, len(rs.pending))
	for k, w := range rs.pending {
		ws = append(ws, collWaitRec{int32(k[0]), k[1], w})
	}
	rs.pending = nil
	slices.SortFunc(ws, func(a, b collWaitRec) int {
		return cmp.Or(cmp.Compare(commOrd(ord, a.comm), commOrd(ord, b.comm)), cmp.Compare(a.seq, b.seq))
	})
	return ws
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
