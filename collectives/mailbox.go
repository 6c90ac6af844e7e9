package collectives

import (
	"context"
	"math/bits"
	"sync"
	"time"
)

// mkey is what a receive matches on.
type mkey struct {
	comm uint32
	p2p  bool
	seq  uint64
}

func keyOf(h Header) mkey { return mkey{h.Comm, h.p2p(), h.Seq} }

// recvReq is a posted receive. Requests are pooled: Wait puts it back.
type recvReq struct {
	box  *mailbox
	h    Header
	buf  []byte
	info RecvInfo
	err  error
	done chan struct{} // capacity 1; signalled exactly once per use
	next *recvReq
}

type reqList struct{ head, tail *recvReq }

// message is one that arrived before its receive was posted.
type message struct {
	h       Header
	data    []byte
	pooled  *[]byte
	arrived time.Time
	next    *message
}

type msgList struct{ head, tail *message }

// mailbox matches the messages from one peer to the receives posted for
// them. Both transports use it: the in-process one delivers from the
// sender's goroutine, the TCP one from the connection's reader.
//
// Receives and early messages wait in order per key. Most of the time a
// peer has a single one of either in flight, as in every step of a
// collective: it waits in req or msg, which are used only while their
// map is empty, so that each is always the oldest of its key, and no key
// is hashed.
type mailbox struct {
	peer   int
	mu     sync.Mutex
	req    *recvReq
	posted map[mkey]reqList
	msg    *message
	unexp  map[mkey]msgList
	err    error // set once the peer has failed
	// poller, if set, waits for the receives instead of Wait (shared
	// memory, where the waiting goroutine polls for its message and
	// copies it itself); it calls wait to block.
	poller interface {
		waitFor(ctx context.Context, r *recvReq) (RecvInfo, error)
	}
	// now stamps the receives the mailbox completes itself: time.Now,
	// or a transport's cheaper clock.
	now func() time.Time
}

func newMailbox(peer int) *mailbox {
	return &mailbox{peer: peer, posted: make(map[mkey]reqList), unexp: make(map[mkey]msgList), now: time.Now}
}

var reqPool = sync.Pool{New: func() any { return &recvReq{done: make(chan struct{}, 1)} }}

var msgPool = sync.Pool{New: func() any { return new(message) }}

// Scratch and unexpected-message buffers come from a free list by
// power-of-two size class. Unlike a sync.Pool it is not emptied by the
// garbage collector: fresh memory costs page faults, and a collective that
// allocated its scratch anew each call would be slowed by them. The list
// keeps at most maxPooled bytes.
const maxPooled = 512 << 20

type bufferPool struct {
	mu      sync.Mutex
	classes [41][]*[]byte
	bytes   int
}

var payloads bufferPool

func getPayload(n int) *[]byte {
	if n == 0 {
		b := []byte{}
		return &b
	}
	c := bits.Len(uint(n - 1))
	payloads.mu.Lock()
	if l := payloads.classes[c]; len(l) > 0 {
		p := l[len(l)-1]
		payloads.classes[c] = l[:len(l)-1]
		payloads.bytes -= cap(*p)
		payloads.mu.Unlock()
		*p = (*p)[:n]
		return p
	}
	payloads.mu.Unlock()
	b := make([]byte, n, 1<<c)
	return &b
}

func putPayload(p *[]byte) {
	n := cap(*p)
	if n == 0 || n&(n-1) != 0 {
		return
	}
	c := bits.Len(uint(n - 1))
	payloads.mu.Lock()
	if payloads.bytes+n <= maxPooled {
		payloads.classes[c] = append(payloads.classes[c], p)
		payloads.bytes += n
	}
	payloads.mu.Unlock()
}

// post registers a receive for h into p. If a matching message is already
// waiting it is copied at once and the returned request is complete.
func (m *mailbox) post(h Header, p []byte) *recvReq {
	r := reqPool.Get().(*recvReq)
	r.box, r.h, r.buf, r.next, r.err = m, h, p, nil, nil
	k := keyOf(h)
	m.mu.Lock()
	if msg := m.takeMessage(k); msg != nil {
		m.mu.Unlock()
		err := check(m.peer, h, len(p), msg.h, len(msg.data))
		if err == nil {
			copy(p, msg.data)
		}
		arrived := msg.arrived
		freeMessage(msg)
		completeAt(r, arrived, m.now(), err)
		return r
	}
	if m.err != nil {
		err := m.err
		m.mu.Unlock()
		complete(r, time.Time{}, err)
		return r
	}
	if m.req == nil && len(m.posted) == 0 {
		m.req = r
		m.mu.Unlock()
		return r
	}
	pl := m.posted[k]
	if pl.tail == nil {
		pl.head = r
	} else {
		pl.tail.next = r
	}
	pl.tail = r
	m.posted[k] = pl
	m.mu.Unlock()
	return r
}

// takeMessage takes the oldest message that arrived for k, or returns nil.
func (m *mailbox) takeMessage(k mkey) *message {
	if msg := m.msg; msg != nil && keyOf(msg.h) == k {
		m.msg = nil
		return msg
	}
	if len(m.unexp) == 0 {
		return nil
	}
	l := m.unexp[k]
	msg := l.head
	if msg == nil {
		return nil
	}
	l.head = msg.next
	if l.head == nil {
		delete(m.unexp, k)
	} else {
		m.unexp[k] = l
	}
	return msg
}

// Wait implements Receive.
func (r *recvReq) Wait(ctx context.Context) (RecvInfo, error) {
	if p := r.box.poller; p != nil {
		return p.waitFor(ctx, r)
	}
	return r.wait(ctx)
}

// wait blocks until r is complete, or ctx ends and withdraws it, and
// releases r.
func (r *recvReq) wait(ctx context.Context) (RecvInfo, error) {
	select {
	case <-r.done:
	default:
		select {
		case <-r.done:
		case <-ctx.Done():
			if r.box.unpost(keyOf(r.h), r) {
				r.release()
				return RecvInfo{}, ctx.Err()
			}
			<-r.done // already being filled: wait for it, the buffer is in use
		}
	}
	info, err := r.info, r.err
	r.release()
	return info, err
}

func (r *recvReq) release() {
	r.buf, r.box = nil, nil
	reqPool.Put(r)
}

// unpost removes r if no message has claimed it yet.
func (m *mailbox) unpost(k mkey, r *recvReq) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.req == r {
		m.req = nil
		return true
	}
	l := m.posted[k]
	var prev *recvReq
	for q := l.head; q != nil; prev, q = q, q.next {
		if q != r {
			continue
		}
		if prev == nil {
			l.head = q.next
		} else {
			prev.next = q.next
		}
		if l.tail == q {
			l.tail = prev
		}
		if l.head == nil {
			delete(m.posted, k)
		} else {
			m.posted[k] = l
		}
		return true
	}
	return false
}

// claim takes the oldest receive posted for h, or returns nil. The caller
// fills it and calls complete.
func (m *mailbox) claim(h Header) *recvReq {
	k := keyOf(h)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.claimLocked(k)
}

func (m *mailbox) claimLocked(k mkey) *recvReq {
	if r := m.req; r != nil && keyOf(r.h) == k {
		m.req = nil
		return r
	}
	if len(m.posted) == 0 {
		return nil
	}
	l, ok := m.posted[k]
	if !ok {
		return nil
	}
	r := l.head
	l.head = r.next
	if l.head == nil {
		delete(m.posted, k)
	} else {
		m.posted[k] = l
	}
	r.next = nil
	return r
}

// complete finishes r; the caller has just copied the message into r's
// buffer (or failed to), so this is where its completion is stamped.
func complete(r *recvReq, arrived time.Time, err error) {
	completeAt(r, arrived, time.Now(), err)
}

// completeAt is complete with the time of completion read by the caller.
func completeAt(r *recvReq, arrived, done time.Time, err error) {
	r.info = RecvInfo{Arrived: arrived}
	if err == nil {
		r.info.Done = done
	}
	r.err = err
	r.done <- struct{}{}
}

// deliver hands over a message whose payload is in data. If a receive is
// posted it is filled from data; otherwise the message is queued, in
// pooled if the caller passes the pooled buffer that holds data (ownership
// moves to the mailbox), or else in a pooled copy of data.
func (m *mailbox) deliver(h Header, data []byte, pooled *[]byte, arrived time.Time) {
	k := keyOf(h)
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		if pooled != nil {
			putPayload(pooled)
		}
		return
	}
	if r := m.claimLocked(k); r != nil {
		m.mu.Unlock()
		err := check(m.peer, r.h, len(r.buf), h, len(data))
		if err == nil {
			copy(r.buf, data)
		}
		if pooled != nil {
			putPayload(pooled)
		}
		completeAt(r, arrived, m.now(), err)
		return
	}
	if pooled == nil {
		pooled = getPayload(len(data))
		copy(*pooled, data)
	}
	msg := msgPool.Get().(*message)
	msg.h, msg.data, msg.pooled, msg.arrived, msg.next = h, *pooled, pooled, arrived, nil
	if m.msg == nil && len(m.unexp) == 0 {
		m.msg = msg
		m.mu.Unlock()
		return
	}
	l := m.unexp[k]
	if l.tail == nil {
		l.head = msg
	} else {
		l.tail.next = msg
	}
	l.tail = msg
	m.unexp[k] = l
	m.mu.Unlock()
}

func freeMessage(msg *message) {
	putPayload(msg.pooled)
	msg.data, msg.pooled, msg.next = nil, nil, nil
	msgPool.Put(msg)
}

// fail makes every pending and later receive from this peer return err.
// Messages that already arrived stay receivable.
func (m *mailbox) fail(err error) {
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return
	}
	m.err = err
	var rs []*recvReq
	if m.req != nil {
		rs = append(rs, m.req)
		m.req = nil
	}
	for k, l := range m.posted {
		for r := l.head; r != nil; {
			next := r.next
			r.next = nil
			rs = append(rs, r)
			r = next
		}
		delete(m.posted, k)
	}
	m.mu.Unlock()
	for _, r := range rs {
		complete(r, time.Time{}, err)
	}
}
