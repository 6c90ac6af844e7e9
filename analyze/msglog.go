package analyze

import (
	"encoding/binary"
	"iter"
)

// A rank's point-to-point messages and its waits, packed as they are
// read: held as records (56 and 48 bytes) they were what grew with a
// message-passing program's run once the collective calls were packed
// (a 4-rank halo exchange: about 100 bytes an event at the peak).

// msgLog holds a rank's point-to-point messages in the order they came,
// each a record of varints (its start a difference from the record
// before's), in a byteLog that spills with the calls'.
//
// The last msgHold to 2*msgHold messages are held unpacked, so that a
// wait on one read after it (the PMPI library writes a completed
// message, then the program's wait on it) marks it waited; a wait that
// finds no message held is kept aside (strays) and matched by settle.
type msgLog struct {
	log    byteLog
	n      int
	start  int64 // the last packed record's
	held   []p2pRec
	strays map[p2pWaitKey]int // message waits that found no held message
	marked []int              // the messages stray waits marked, by place
}

// msgHold is how many messages are held unpacked for their waits: a
// completion call over many requests writes each message just before
// its wait.
const msgHold = 64

// msgLogMax is the most a record takes: 8 varints.
const msgLogMax = 8 * binary.MaxVarintLen64

func (l *msgLog) add(m p2pRec) {
	l.n++
	if len(l.held) == 2*msgHold {
		for _, h := range l.held[:msgHold] {
			l.pack(h)
		}
		l.held = l.held[:copy(l.held, l.held[msgHold:])]
	}
	l.held = append(l.held, m)
}

func (l *msgLog) pack(m p2pRec) {
	flags := uint64(0)
	if m.send {
		flags |= 1
	}
	if m.waited {
		flags |= 2
	}
	b := l.log.room(msgLogMax)
	b = binary.AppendUvarint(b, flags)
	b = binary.AppendVarint(b, int64(m.comm))
	b = binary.AppendVarint(b, int64(m.peer))
	b = binary.AppendVarint(b, m.tag)
	b = binary.AppendVarint(b, m.start-l.start)
	b = binary.AppendVarint(b, m.end-m.start)
	b = binary.AppendVarint(b, m.wait)
	b = binary.AppendVarint(b, m.bytes)
	l.log.wrote(b)
	l.start = m.start
}

// wait notes the program's wait on the message k names: the latest held
// message of that key not yet waited is marked.
func (l *msgLog) wait(k p2pWaitKey) {
	for i := len(l.held) - 1; i >= 0; i-- {
		m := &l.held[i]
		if m.end == k.end && !m.waited && m.tag == k.tag && m.peer == k.peer && m.bytes == k.bytes && m.comm == k.comm {
			m.waited = true
			return
		}
	}
	if l.strays == nil {
		l.strays = map[p2pWaitKey]int{}
	}
	l.strays[k]++
}

// settle matches the stray waits, once every message is read: each
// marks the first message of its key not marked otherwise, in the order
// the messages came. Call it before all, and add nothing after.
func (l *msgLog) settle() {
	if len(l.strays) == 0 {
		return
	}
	i := 0
	for m := range l.all() {
		if k := (p2pWaitKey{m.comm, m.peer, m.tag, m.bytes, m.end}); !m.waited && l.strays[k] > 0 {
			l.marked = append(l.marked, i)
			if l.strays[k]--; l.strays[k] == 0 {
				delete(l.strays, k)
			}
		}
		i++
	}
	l.strays = nil
}

// all yields the messages in the order they came, each marked waited if
// a wait of the program's completed it. Walks may run side by side; one
// ends early where a spilled chunk cannot be read back (the spill
// records the error).
func (l *msgLog) all() iter.Seq[p2pRec] {
	return func(yield func(p2pRec) bool) {
		rd := l.log.reader()
		var m p2pRec
		marked := l.marked
		i := 0
		give := func(m p2pRec) bool {
			if len(marked) > 0 && marked[0] == i {
				m.waited, marked = true, marked[1:]
			}
			i++
			return yield(m)
		}
		for range l.n - len(l.held) {
			if !m.unpack(rd.bytes(), &rd) || !give(m) {
				return
			}
		}
		for _, h := range l.held {
			if !give(h) {
				return
			}
		}
	}
}

// unpack reads the record at the head of b, written after m (whose start
// it goes on from), and moves rd past it.
func (m *p2pRec) unpack(b []byte, rd *byteReader) bool {
	var x [8]uint64
	n := uvarints(b, x[:])
	if n == 0 {
		return false
	}
	start := m.start + unzig(x[4])
	*m = p2pRec{send: x[0]&1 != 0, waited: x[0]&2 != 0, comm: int32(unzig(x[1])), peer: int32(unzig(x[2])), tag: unzig(x[3]),
		start: start, end: start + unzig(x[5]), wait: unzig(x[6]), bytes: unzig(x[7])}
	rd.skip(n)
	return true
}

// waitLog holds a rank's waits on non-blocking calls in the order they
// came, packed as msgLog's messages are.
type waitLog struct {
	log   byteLog
	n     int
	start int64
}

const waitLogMax = 7 * binary.MaxVarintLen64

func (l *waitLog) add(w waitRec) {
	b := l.log.room(waitLogMax)
	b = binary.AppendVarint(b, int64(w.comm))
	b = binary.AppendVarint(b, int64(w.name))
	b = binary.AppendVarint(b, int64(w.peer))
	b = binary.AppendVarint(b, w.seq)
	b = binary.AppendVarint(b, w.bytes)
	b = binary.AppendVarint(b, w.start-l.start)
	b = binary.AppendVarint(b, w.end-w.start)
	l.log.wrote(b)
	l.start = w.start
	l.n++
}

// all yields the waits in the order they came; as msgLog's, a walk ends
// early where a spilled chunk cannot be read back.
func (l *waitLog) all() iter.Seq[waitRec] {
	return func(yield func(waitRec) bool) {
		rd := l.log.reader()
		var start int64
		for range l.n {
			var x [7]uint64
			n := uvarints(rd.bytes(), x[:])
			if n == 0 {
				return
			}
			rd.skip(n)
			start += unzig(x[5])
			w := waitRec{comm: int32(unzig(x[0])), name: int32(unzig(x[1])), peer: int32(unzig(x[2])), seq: unzig(x[3]), bytes: unzig(x[4]),
				start: start, end: start + unzig(x[6])}
			if !yield(w) {
				return
			}
		}
	}
}
