package analyze

import (
	"cmp"
	"encoding/binary"
	"slices"
)

// callLog holds one rank's collective calls as they are read, packed:
// each record's fields as varints, its sequence number and start as
// differences from the record before. A record takes 15-25 bytes where a
// callRec takes 72, and the log grows by whole chunks, never copied. The
// run's calls are never held unpacked: each analysis reads the logs
// again, merged a chunk at a time (callSource).
//
// The merge wants each rank's calls in (comm, seq) order. A rank's calls
// on one communicator come in sequence order, nearly: so the log keeps a
// run of records per communicator, and starts another where a call comes
// out of order (a call's event written late); the reader merges the runs.
type callLog struct {
	runs  []*callRun
	open  map[int32]*callRun // the run a communicator's next call goes to
	count map[int32]int      // runs by communicator
	n     int
}

// callRun is one communicator's calls in sequence order, unless it is
// unsorted: a communicator whose calls came out of order callLogRuns
// times goes on in its last run, in any order, and is sorted when read.
type callRun struct {
	comm       int32
	chunks     [][]byte
	n          int
	seq, start int64 // the last record's, which the next is written against
	unsorted   bool
}

const (
	callLogChunk = 1 << 20 // the largest chunk; a run's first are smaller
	// callLogMax is the most a record takes: 10 varints of at most 10
	// bytes.
	callLogMax = 10 * binary.MaxVarintLen64
	// callLogRuns is how many runs of one communicator are kept, and
	// merged as they are read; beyond, its calls are sorted when read.
	callLogRuns = 64
)

// add appends c; its comm chooses the run, its rank is the log's, and its
// region and flags are worked out at the merge.
func (l *callLog) add(c callRec) {
	r := l.open[c.comm]
	switch {
	case r != nil && c.seq < r.seq && l.count[c.comm] >= callLogRuns:
		// Calls in no order to speak of (non-blocking ones completing
		// out of order): a run per call would cost a chunk per call.
		r.unsorted = true
	case r == nil || c.seq < r.seq:
		r = &callRun{comm: c.comm}
		l.runs = append(l.runs, r)
		if l.open == nil {
			l.open, l.count = map[int32]*callRun{}, map[int32]int{}
		}
		l.open[c.comm] = r
		l.count[c.comm]++
	}
	last := len(r.chunks) - 1
	if last < 0 || cap(r.chunks[last])-len(r.chunks[last]) < callLogMax {
		size := 4 << 10
		if last >= 0 {
			size = min(2*cap(r.chunks[last]), callLogChunk)
		}
		r.chunks = append(r.chunks, make([]byte, 0, size))
		last++
	}
	b := r.chunks[last]
	b = binary.AppendUvarint(b, uint64(uint32(c.name)))
	b = binary.AppendUvarint(b, uint64(uint32(c.algo)))
	b = binary.AppendUvarint(b, uint64(uint32(c.label)))
	b = binary.AppendVarint(b, int64(c.root))
	b = binary.AppendVarint(b, int64(c.step))
	b = binary.AppendVarint(b, c.seq-r.seq)
	b = binary.AppendVarint(b, c.start-r.start)
	b = binary.AppendVarint(b, c.dur)
	b = binary.AppendVarint(b, c.bytes)
	b = binary.AppendVarint(b, c.recvWait)
	r.chunks[last] = b
	r.seq, r.start = c.seq, c.start
	r.n++
	l.n++
}

// runReader unpacks one run's records in order. Readers share the run
// and leave it as it is: any number may read it, at once.
type runReader struct {
	r          *callRun
	rank       int32
	chunk, off int
	seq, start int64
	left       int
	head       callRec
	ok         bool
}

func (rr *runReader) next() {
	rr.ok = rr.left > 0
	if !rr.ok {
		return
	}
	b := rr.r.chunks[rr.chunk][rr.off:]
	i := 0
	v := func() int64 {
		x, n := binary.Varint(b[i:])
		i += n
		return x
	}
	u := func() int32 {
		x, n := binary.Uvarint(b[i:])
		i += n
		return int32(uint32(x))
	}
	c := callRec{comm: rr.r.comm, rank: rr.rank}
	c.name, c.algo, c.label = u(), u(), u()
	c.root, c.step = int32(v()), int32(v())
	rr.seq += v()
	rr.start += v()
	c.seq, c.start = rr.seq, rr.start
	c.dur, c.bytes, c.recvWait = v(), v(), v()
	rr.off += i
	if rr.off == len(rr.r.chunks[rr.chunk]) {
		rr.chunk, rr.off = rr.chunk+1, 0
	}
	rr.left--
	rr.head = c
}

// logReader reads a callLog's records in (comm, seq) order: one
// communicator after the other, its runs merged.
type logReader struct {
	rank   int32
	comms  [][]*callRun // by communicator, in order
	cur    []*runReader // the current communicator's runs
	sorted []callRec    // the current communicator's records, when it had too many runs
	head   callRec
	ok     bool
}

// reader returns a reader of the log's records in (comm, seq) order,
// positioned on the first. The log is left as it is.
func (l *callLog) reader(rank int) *logReader {
	byComm := map[int32][]*callRun{}
	for _, r := range l.runs {
		byComm[r.comm] = append(byComm[r.comm], r)
	}
	lr := &logReader{rank: int32(rank)}
	for _, c := range slices.Sorted(func(yield func(int32) bool) {
		for c := range byComm {
			if !yield(c) {
				return
			}
		}
	}) {
		lr.comms = append(lr.comms, byComm[c])
	}
	lr.next()
	return lr
}

// next moves to the next record; ok is false past the last.
func (lr *logReader) next() {
	for {
		if len(lr.sorted) > 0 {
			lr.head, lr.sorted, lr.ok = lr.sorted[0], lr.sorted[1:], true
			return
		}
		// The run whose head comes first; on a tie the earlier run (calls
		// without sequence numbers keep the order they came in).
		best := -1
		for i, rr := range lr.cur {
			if rr.ok && (best < 0 || rr.head.seq < lr.cur[best].head.seq) {
				best = i
			}
		}
		if best >= 0 {
			lr.head, lr.ok = lr.cur[best].head, true
			lr.cur[best].next()
			return
		}
		if len(lr.comms) == 0 {
			lr.ok = false
			return
		}
		runs := lr.comms[0]
		lr.comms = lr.comms[1:]
		lr.cur = lr.cur[:0]
		for _, r := range runs {
			rr := &runReader{r: r, rank: lr.rank, left: r.n}
			rr.next()
			lr.cur = append(lr.cur, rr)
		}
		if slices.ContainsFunc(runs, func(r *callRun) bool { return r.unsorted }) {
			// Calls in no order to speak of: sort them.
			var all []callRec
			for _, rr := range lr.cur {
				for ; rr.ok; rr.next() {
					all = append(all, rr.head)
				}
			}
			slices.SortStableFunc(all, func(a, b callRec) int { return cmp.Compare(a.seq, b.seq) })
			lr.sorted, lr.cur = all, lr.cur[:0]
		}
	}
}
