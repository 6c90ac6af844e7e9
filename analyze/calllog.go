package analyze

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
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
	spill *logSpill // nil: every chunk stays in memory
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
	log        byteLog
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
// region and lateness are worked out at the merge. Whether the program
// waited on it is kept when known as it was read (nonBlocking).
func (l *callLog) add(c callRec) {
	r := l.open[c.comm]
	switch {
	case r != nil && c.seq < r.seq && l.count[c.comm] >= callLogRuns:
		// Calls in no order to speak of (non-blocking ones completing
		// out of order): a run per call would cost a chunk per call.
		r.unsorted = true
	case r == nil || c.seq < r.seq:
		r = &callRun{comm: c.comm, log: byteLog{sp: l.spill}}
		l.runs = append(l.runs, r)
		if l.open == nil {
			l.open, l.count = map[int32]*callRun{}, map[int32]int{}
		}
		l.open[c.comm] = r
		l.count[c.comm]++
	}
	b := r.log.room(callLogMax)
	nb := uint64(0)
	if c.nonBlocking {
		nb = 1
	}
	b = binary.AppendUvarint(b, uint64(uint32(c.name))<<1|nb)
	b = binary.AppendUvarint(b, uint64(uint32(c.algo)))
	b = binary.AppendUvarint(b, uint64(uint32(c.label)))
	b = binary.AppendVarint(b, int64(c.root))
	b = binary.AppendVarint(b, int64(c.step))
	b = binary.AppendVarint(b, c.seq-r.seq)
	b = binary.AppendVarint(b, c.start-r.start)
	b = binary.AppendVarint(b, c.dur)
	b = binary.AppendVarint(b, c.bytes)
	b = binary.AppendVarint(b, c.recvWait)
	r.log.wrote(b)
	r.seq, r.start = c.seq, c.start
	r.n++
	l.n++
}

// runReader unpacks one run's records in order. Readers share the run
// and leave it as it is: any number may read it, at once.
type runReader struct {
	r          *callRun
	rd         byteReader
	rank       int32
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
	b := rr.rd.bytes()
	if b == nil {
		rr.ok, rr.left = false, 0 // a spilled chunk could not be read back
		return
	}
	var x [10]uint64
	i := uvarints(b, x[:])
	if i == 0 {
		rr.ok, rr.left = false, 0 // bytes the log did not write
		return
	}
	c := callRec{comm: rr.r.comm, rank: rr.rank}
	c.name, c.nonBlocking = int32(uint32(x[0]>>1)), x[0]&1 != 0
	c.algo, c.label = int32(uint32(x[1])), int32(uint32(x[2]))
	c.root, c.step = int32(unzig(x[3])), int32(unzig(x[4]))
	rr.seq += unzig(x[5])
	rr.start += unzig(x[6])
	c.seq, c.start = rr.seq, rr.start
	c.dur, c.bytes, c.recvWait = unzig(x[7]), unzig(x[8]), unzig(x[9])
	rr.rd.skip(i)
	rr.left--
	rr.head = c
}

// uvarints reads len(x) varints from the head of b into x, the one-byte
// ones (most) without a call, and returns the bytes they took: 0 if b
// does not hold them all (bytes a log did not write, or none at all
// where a spilled chunk could not be read back). Every packed record of
// the logs (calls, messages, waits) is read with it.
func uvarints(b []byte, x []uint64) int {
	i := 0
	for k := range x {
		if i >= len(b) {
			return 0
		}
		if c := b[i]; c < 0x80 {
			x[k], i = uint64(c), i+1
			continue
		}
		y, n := binary.Uvarint(b[i:])
		if n <= 0 {
			return 0
		}
		x[k], i = y, i+n
	}
	return i
}

// unzig undoes binary.AppendVarint's zig-zag: a value uvarints read of
// what AppendVarint wrote.
func unzig(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

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
// communicators in ord's order (nil: their own), positioned on the
// first. The log is left as it is.
func (l *callLog) reader(rank int, ord []int32) *logReader {
	byComm := map[int32][]*callRun{}
	for _, r := range l.runs {
		byComm[r.comm] = append(byComm[r.comm], r)
	}
	lr := &logReader{rank: int32(rank)}
	comms := slices.Collect(maps.Keys(byComm))
	slices.SortFunc(comms, func(a, b int32) int { return cmp.Compare(commOrd(ord, a), commOrd(ord, b)) })
	for _, c := range comms {
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
			rr := &runReader{r: r, rd: r.log.reader(), rank: lr.rank, left: r.n}
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

// byteLog is bytes appended in chunks that grow to callLogChunk, never
// copied; each full chunk goes to the spill once the spill's budget is
// passed. A record written after room never straddles two chunks.
type byteLog struct {
	sp     *logSpill // nil: every chunk stays in memory
	chunks []logChunk
}

// room returns the last chunk, with room for n more bytes, to append to;
// wrote stores it back.
func (l *byteLog) room(n int) []byte {
	last := len(l.chunks) - 1
	if last < 0 || cap(l.chunks[last].b)-len(l.chunks[last].b) < n {
		size := 4 << 10
		if last >= 0 {
			size = min(2*cap(l.chunks[last].b), callLogChunk)
			l.sp.put(&l.chunks[last])
		}
		l.chunks = append(l.chunks, logChunk{b: make([]byte, 0, max(size, n))})
		l.sp.hold(size)
	}
	return l.chunks[len(l.chunks)-1].b
}

func (l *byteLog) wrote(b []byte) { l.chunks[len(l.chunks)-1].b = b }

// byteReader reads a byteLog's chunks in order. Readers share the log
// and leave it as it is; a copy reads on from where the original was,
// into a buffer of its own (clearBuf).
type byteReader struct {
	l          *byteLog
	chunk, off int
	cur, buf   []byte // the chunk being read; buf holds one read back from the spill
	loaded     bool
}

func (l *byteLog) reader() byteReader { return byteReader{l: l} }

// bytes returns the rest of the current chunk, nil past the end or when
// a spilled chunk cannot be read back.
func (r *byteReader) bytes() []byte {
	for {
		if r.loaded && r.off < len(r.cur) {
			return r.cur[r.off:]
		}
		if r.loaded {
			r.chunk, r.off, r.loaded = r.chunk+1, 0, false
		}
		if r.l == nil || r.chunk >= len(r.l.chunks) {
			return nil
		}
		var err error
		if r.cur, err = r.l.sp.get(&r.l.chunks[r.chunk], &r.buf); err != nil {
			return nil
		}
		r.loaded = true
	}
}

// skip moves n bytes on.
func (r *byteReader) skip(n int) { r.off += n }

// own gives a copy of a reader a buffer of its own: the original's may
// hold the chunk the original is reading.
func (r *byteReader) own() { r.buf = nil }

// logChunk is a chunk of a byteLog: in memory, or written to the spill
// (b nil) at off, n bytes.
type logChunk struct {
	b   []byte
	off int64
	n   int
}

// logSpill is where the run's logs of calls, messages and waits and its
// spans put their full chunks once the chunks held in memory pass a
// budget, so that a summary's memory does not grow with the run's
// calls and messages: the file Meta.Spill opens,
// read back by any number of passes at once. Without one, or if it
// cannot be opened or written, chunks stay in memory.
type logSpill struct {
	budget int64
	open   func() (SpillFile, error)
	mu     sync.Mutex // guards the rest
	held   int64      // bytes of chunks in memory
	f      SpillFile
	size   int64
	failed bool
	err    error // the first read error, which cuts the calls short
}

// callLogBudget is the bytes of packed calls a summary holds in memory
// before it spills them: about 9 million rank calls.
const callLogBudget = 128 << 20

func (sp *logSpill) hold(n int) {
	if sp == nil {
		return
	}
	sp.mu.Lock()
	sp.held += int64(n)
	sp.mu.Unlock()
}

// put writes a full chunk to the spill when the budget is passed.
func (sp *logSpill) put(c *logChunk) {
	if sp == nil || c.b == nil {
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.failed || sp.held <= sp.budget {
		return
	}
	if sp.f == nil {
		var err error
		if sp.open == nil {
			sp.failed = true
			return
		}
		if sp.f, err = sp.open(); err != nil {
			sp.f, sp.failed = nil, true
			return
		}
	}
	if _, err := sp.f.WriteAt(c.b, sp.size); err != nil {
		sp.failed = true // a full disk: keep the rest in memory
		return
	}
	sp.held -= int64(cap(c.b))
	c.off, c.n, c.b = sp.size, len(c.b), nil
	sp.size += int64(c.n)
}

// get returns a chunk's bytes, read back into buf if it was spilled.
func (sp *logSpill) get(c *logChunk, buf *[]byte) ([]byte, error) {
	if c.b != nil {
		return c.b, nil
	}
	*buf = slices.Grow((*buf)[:0], c.n)[:c.n]
	if _, err := sp.f.ReadAt(*buf, c.off); err != nil {
		err = fmt.Errorf("reading back the calls and messages spilled to a file: %w", err)
		sp.mu.Lock()
		sp.err = cmp.Or(sp.err, err)
		sp.mu.Unlock()
		return nil, err
	}
	return *buf, nil
}

// close lets the spill file go.
func (sp *logSpill) close() {
	if sp != nil && sp.f != nil {
		if c, ok := sp.f.(io.Closer); ok {
			c.Close()
		}
		sp.f = nil
	}
}

// commOrd is communicator c's place in the order of ord: the order of
// the communicators' names, so that calls merge in the same order
// whichever rank's reader interned a name first (nil: c's own).
func commOrd(ord []int32, c int32) int32 {
	if ord == nil || int(c) >= len(ord) {
		return c
	}
	return ord[c]
}
