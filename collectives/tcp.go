package collectives

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// TCPConfig configures a TCP transport.
type TCPConfig struct {
	// Secret must match on every rank; connections that present another are refused.
	Secret string
	// Heartbeat is how often an idle connection sends a heartbeat frame (default 1s).
	Heartbeat time.Duration
	// PeerTimeout is how long a connection may stay silent, with neither
	// data nor heartbeats, before its peer is declared failed (default 15s).
	PeerTimeout time.Duration
	// SocketBuffer is the send and receive buffer size of each socket (default 4 MiB).
	SocketBuffer int
	// RawIO says which socket calls are raw system calls rather than the
	// net package's, which spares the Go scheduler a thread hand-over
	// around every long call (sockio_linux.go). Linux only; ignored
	// elsewhere.
	RawIO RawIO
	// Congestion is the TCP congestion control of the sockets: "" for
	// commprof's choice, reno, which every Linux host allows; "system" for
	// the host's default; or any algorithm the host allows. bbr, a common
	// default, keeps about twice its estimate of the bandwidth-delay
	// product in flight, and on a short path that estimate is small: over
	// loopback its window held 16-48 segments of 64 KiB where reno's grew
	// to 149-318, so every message of a few MiB waited for
	// acknowledgements that need the receiving rank to run, and reno
	// measured about twice bbr's busbw (docs/collectives.md). Linux only;
	// ignored elsewhere.
	Congestion string
	// MaxUnexpected is the largest message buffered when it arrives before
	// its receive is posted (default 1 GiB); a larger one fails the peer,
	// so a broken or hostile peer cannot make this rank allocate at will.
	MaxUnexpected int
	// firstSilence is how long a peer that has sent nothing yet may stay
	// silent: Join sets it to its own timeout, since a peer that has not
	// started may still be setting up its links to the others (on one
	// machine of hundreds of ranks, tens of seconds after this rank).
	firstSilence time.Duration
}

func (c TCPConfig) withDefaults() TCPConfig {
	if c.Heartbeat <= 0 {
		c.Heartbeat = time.Second
	}
	if c.PeerTimeout <= 0 {
		c.PeerTimeout = 15 * time.Second
	}
	if c.PeerTimeout < 2*c.Heartbeat {
		c.PeerTimeout = 2 * c.Heartbeat
	}
	if c.MaxUnexpected <= 0 {
		c.MaxUnexpected = 1 << 30
	}
	if c.firstSilence < c.PeerTimeout {
		c.firstSilence = c.PeerTimeout
	}
	if c.SocketBuffer <= 0 {
		c.SocketBuffer = 4 << 20
	}
	return c
}

// Wire format: every frame starts with a 32-byte little-endian header.
//
//	0  magic 0xC7   1 frame type   2 op   3 dtype
//	4  comm u32     8 seq u64      16 chunk i32   20 algo u8, 3 bytes zero
//	24 payload length u64
//
// An abort frame's payload is the failed rank (i32) and a reason (UTF-8).
const (
	hdrLen     = 32
	frameMagic = 0xC7

	frameData      = 1
	frameHeartbeat = 2
	frameAbort     = 3
	frameBye       = 4 // the sender closed its transport on purpose

	maxPayload = 1 << 40
	smallFrame = 8 << 10 // payloads up to this are copied behind the header: one write
)

func putHeader(b []byte, typ byte, h Header, n int) {
	b[0], b[1], b[2], b[3] = frameMagic, typ, byte(h.Op), byte(h.DType)
	binary.LittleEndian.PutUint32(b[4:], h.Comm)
	binary.LittleEndian.PutUint64(b[8:], h.Seq)
	binary.LittleEndian.PutUint32(b[16:], uint32(h.Chunk))
	b[20], b[21], b[22], b[23] = byte(h.Algo), 0, 0, 0
	binary.LittleEndian.PutUint64(b[24:], uint64(n))
}

func parseHeader(b []byte) (typ byte, h Header, n uint64, ok bool) {
	if b[0] != frameMagic {
		return 0, h, 0, false
	}
	h = Header{
		Op: Op(b[2]), DType: DType(b[3]),
		Comm:  binary.LittleEndian.Uint32(b[4:]),
		Seq:   binary.LittleEndian.Uint64(b[8:]),
		Chunk: int32(binary.LittleEndian.Uint32(b[16:])),
		Algo:  Algo(b[20]),
	}
	return b[1], h, binary.LittleEndian.Uint64(b[24:]), true
}

// TCP is a Transport over one TCP connection per pair of ranks. Each
// connection has a reader goroutine that reads a message straight into the
// receive posted for it, or into a pooled buffer when none is posted yet.
// Sends write header and payload with one writev, without copying the
// payload.
type TCP struct {
	rank, size int
	cfg        TCPConfig
	peers      []*peerConn // nil at rank
	self       *mailbox

	failOnce  sync.Once
	failErr   atomic.Pointer[error]
	closed    atomic.Bool
	closeOnce sync.Once
	done      chan struct{}
	wg        sync.WaitGroup
	// onFail, if set, hears of the first failure once it is recorded: the
	// Mesh passes it on to the shared-memory links.
	onFail atomic.Pointer[func(*PeerError)]
}

type peerConn struct {
	rank      int
	conn      *net.TCPConn
	br        *bufio.Reader
	dr        *deadlineReader // under br; read by the reader goroutine only
	box       *mailbox
	wmu       sync.Mutex
	small     [hdrLen + smallFrame]byte
	io        sockIO
	lastWrite atomic.Int64  // unix ns
	readDone  chan struct{} // closed when the reader goroutine ends
}

// RawIO is which socket calls are raw system calls.
type RawIO uint8

// RawIO modes. Measured on 2 cores (docs/collectives.md): with ranks
// outnumbering cores RawOn was fastest at every size; with a core per
// rank RawOn made small messages 8 µs slower and large ones faster, and
// RawLarge kept both gains.
const (
	RawOff   RawIO = iota // every call through the net package
	RawLarge              // reads, and writes of payloads of at least 64 KiB
	RawOn                 // every read and write
)

// rawIONames are the modes' names, as COMMPROF_RAW_IO takes them.
var rawIONames = [...]string{RawOff: "off", RawLarge: "large", RawOn: "on"}

func (m RawIO) String() string {
	if int(m) < len(rawIONames) {
		return rawIONames[m]
	}
	return fmt.Sprintf("RawIO(%d)", uint8(m))
}

// DefaultCongestion is the TCP congestion control commprof sets on its
// sockets unless TCPConfig.Congestion says otherwise.
const DefaultCongestion = "reno"

// Describe says how the sockets are driven, for benchmark headers: the
// congestion control and the raw I/O mode.
func (c TCPConfig) Describe() string {
	cc := c.Congestion
	switch cc {
	case "":
		cc = DefaultCongestion
	case "system":
		cc = "the host's default"
		if name := hostCongestion(); name != "" {
			cc += " (" + name + ")"
		}
	}
	return fmt.Sprintf("TCP congestion control %s, raw I/O %s", cc, c.RawIO)
}

// NewTCP builds a transport from connections already established and
// authenticated, conns[i] being the connection to rank i (nil at rank).
// On success the transport owns the connections.
func NewTCP(rank int, conns []*net.TCPConn, cfg TCPConfig) (*TCP, error) {
	cfg = cfg.withDefaults()
	t := &TCP{rank: rank, size: len(conns), cfg: cfg, peers: make([]*peerConn, len(conns)),
		self: newMailbox(rank), done: make(chan struct{})}
	for i, c := range conns {
		if i == rank || c == nil {
			continue
		}
		_ = c.SetNoDelay(true)
		_ = c.SetReadBuffer(cfg.SocketBuffer)
		_ = c.SetWriteBuffer(cfg.SocketBuffer)
		// Join set it before connecting; connections made elsewhere get
		// it here.
		if ctl := congestionControl(cfg.Congestion); ctl != nil {
			rc, err := c.SyscallConn()
			if err == nil {
				err = ctl("tcp", "", rc)
			}
			if err != nil {
				return nil, fmt.Errorf("connection to rank %d: %w", i, err)
			}
		}
		p := &peerConn{rank: i, conn: c, box: newMailbox(i), readDone: make(chan struct{})}
		var err error
		if p.io, err = newSockIO(c, cfg.RawIO); err != nil {
			return nil, fmt.Errorf("connection to rank %d: %w", i, err)
		}
		p.dr = &deadlineReader{c: c, io: p.io, d: cfg.PeerTimeout, first: cfg.firstSilence}
		p.br = bufio.NewReaderSize(p.dr, 64<<10)
		p.lastWrite.Store(time.Now().UnixNano())
		t.peers[i] = p
	}
	for _, p := range t.peers {
		if p != nil {
			t.wg.Add(1)
			go t.readLoop(p)
		}
	}
	// A first heartbeat now tells each peer that this rank has joined:
	// until then it allows the join's time, not the peer timeout.
	t.beat(time.Now(), 0)
	t.wg.Add(1)
	go t.heartbeats()
	return t, nil
}

// deadlineReader pushes the read deadline forward before every read, so a
// connection fails only after d without any bytes (first, until the peer
// has sent its first).
type deadlineReader struct {
	c        *net.TCPConn
	io       sockIO
	d, first time.Duration
	heard    bool
}

// silence is how long the peer may now stay silent.
func (r *deadlineReader) silence() time.Duration {
	if r.heard {
		return r.d
	}
	return r.first
}

func (r *deadlineReader) Read(p []byte) (int, error) {
	if err := r.c.SetReadDeadline(time.Now().Add(r.silence())); err != nil {
		return 0, err
	}
	n, err := r.io.read(p)
	r.heard = r.heard || n > 0
	return n, err
}

// Rank implements Transport.
func (t *TCP) Rank() int { return t.rank }

// Size implements Transport.
func (t *TCP) Size() int { return t.size }

func (t *TCP) err() error {
	if p := t.failErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Send implements Transport.
func (t *TCP) Send(ctx context.Context, to int, h Header, p []byte) error {
	if to < 0 || to >= t.size {
		return fmt.Errorf("send to rank %d: no such rank in a world of %d", to, t.size)
	}
	if err := t.err(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if to == t.rank {
		t.self.deliver(h, p, nil, time.Now())
		return nil
	}
	pc := t.peers[to]
	pc.wmu.Lock()
	var err error
	if len(p) <= smallFrame {
		putHeader(pc.small[:], frameData, h, len(p))
		n := copy(pc.small[hdrLen:], p)
		err = pc.io.writev(pc.small[:hdrLen+n], nil)
	} else {
		putHeader(pc.small[:], frameData, h, len(p))
		err = pc.io.writev(pc.small[:hdrLen], p)
	}
	pc.lastWrite.Store(time.Now().UnixNano())
	pc.wmu.Unlock()
	if err != nil {
		if t.closed.Load() {
			return ErrClosed
		}
		// The peer may have closed the connection because it is aborting
		// for another rank's failure: its abort frame is then waiting to
		// be read, and names the real culprit.
		select {
		case <-pc.readDone:
		case <-time.After(time.Second):
		}
		if e := t.err(); e != nil {
			return e
		}
		pe := &PeerError{Rank: to, Reporter: -1, Reason: "sending failed", Err: err}
		t.fail(pe)
		return pe
	}
	return nil
}

// Post implements Transport.
func (t *TCP) Post(from int, h Header, p []byte) Receive {
	if from < 0 || from >= t.size {
		return failedReceive{fmt.Errorf("recv from rank %d: no such rank in a world of %d", from, t.size)}
	}
	if from == t.rank {
		return t.self.post(h, p)
	}
	return t.peers[from].box.post(h, p)
}

func (t *TCP) readLoop(pc *peerConn) {
	defer t.wg.Done()
	defer close(pc.readDone)
	var hb [hdrLen]byte
	for {
		if _, err := io.ReadFull(pc.br, hb[:]); err != nil {
			t.readFailed(pc, err)
			return
		}
		typ, h, n, ok := parseHeader(hb[:])
		if !ok || n > maxPayload {
			t.fail(&PeerError{Rank: pc.rank, Reporter: -1, Reason: "sent a malformed frame (is it running the same commprof version?)"})
			return
		}
		switch typ {
		case frameHeartbeat:
			continue
		case frameAbort:
			buf := make([]byte, min(n, 1<<16))
			if _, err := io.ReadFull(pc.br, buf); err != nil {
				t.readFailed(pc, err)
				return
			}
			if len(buf) < 4 {
				t.fail(&PeerError{Rank: pc.rank, Reporter: -1, Reason: "sent a malformed frame (an abort without a rank)"})
				return
			}
			cause := int(int32(binary.LittleEndian.Uint32(buf)))
			if cause < 0 || cause >= t.size {
				t.fail(&PeerError{Rank: pc.rank, Reporter: -1, Reason: "sent a malformed frame (an abort naming no rank)"})
				return
			}
			pe := &PeerError{Rank: cause, Reporter: pc.rank, Reason: string(buf[4:])}
			if cause == pc.rank {
				pe.Reporter = -1
			}
			t.fail(pe)
			return
		case frameBye:
			// Messages already read stay receivable; later receives from
			// this peer fail, but the job goes on.
			pc.box.fail(&PeerError{Rank: pc.rank, Reporter: -1, Reason: "closed its transport"})
			return
		case frameData:
		default:
			t.fail(&PeerError{Rank: pc.rank, Reporter: -1, Reason: fmt.Sprintf("sent unknown frame type %d", typ)})
			return
		}
		arrived := time.Now()
		if r := pc.box.claim(h); r != nil {
			if err := check(pc.rank, r.h, len(r.buf), h, int(n)); err != nil {
				if _, derr := io.CopyN(io.Discard, pc.br, int64(n)); derr != nil {
					complete(r, arrived, err)
					t.readFailed(pc, derr)
					return
				}
				complete(r, arrived, err)
				continue
			}
			if _, err := io.ReadFull(pc.br, r.buf); err != nil {
				pe := t.readFailed(pc, err)
				complete(r, arrived, pe)
				return
			}
			complete(r, arrived, nil)
			continue
		}
		if n > uint64(t.cfg.MaxUnexpected) {
			t.fail(&PeerError{Rank: pc.rank, Reporter: -1, Reason: fmt.Sprintf(
				"sent a %d-byte message (%s #%d) before this rank posted its receive; at most %d bytes are buffered",
				n, h.Op, h.Seq, t.cfg.MaxUnexpected)})
			return
		}
		buf := getPayload(int(n))
		if _, err := io.ReadFull(pc.br, *buf); err != nil {
			putPayload(buf)
			t.readFailed(pc, err)
			return
		}
		pc.box.deliver(h, *buf, buf, arrived)
	}
}

// readFailed turns a read error into the failure of the peer (or of the
// transport, if it was closed here) and returns the error calls will see.
func (t *TCP) readFailed(pc *peerConn, err error) error {
	if t.closed.Load() {
		pc.box.fail(ErrClosed)
		return ErrClosed
	}
	if e := t.err(); e != nil {
		return e
	}
	reason := "connection lost"
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		reason, err = "connection closed (the process exited or was killed)", nil
	case errors.As(err, &ne) && ne.Timeout():
		reason, err = fmt.Sprintf("no data or heartbeat for %v (hung, stopped, or unreachable)", pc.dr.silence()), nil
	}
	pe := &PeerError{Rank: pc.rank, Reporter: -1, Reason: reason, Err: err}
	t.fail(pe)
	return t.err()
}

// fail records the first failure, tells every live peer (so ranks blocked
// on someone else stop too), and fails every pending and later call.
func (t *TCP) fail(pe *PeerError) {
	first := false
	t.failOnce.Do(func() {
		first = true
		var err error = pe
		t.failErr.Store(&err)
		var payload [hdrLen + 4 + 512]byte
		reason := pe.Reason
		if pe.Err != nil {
			reason += ": " + pe.Err.Error()
		}
		n := 4 + copy(payload[hdrLen+4:], reason)
		putHeader(payload[:], frameAbort, Header{}, n)
		binary.LittleEndian.PutUint32(payload[hdrLen:], uint32(int32(pe.Rank)))
		for _, p := range t.peers {
			if p == nil || p.rank == pe.Rank || p.rank == pe.Reporter {
				continue
			}
			_ = p.conn.SetWriteDeadline(time.Now().Add(500 * time.Millisecond))
			p.wmu.Lock()
			_, _ = p.conn.Write(payload[:hdrLen+n])
			p.wmu.Unlock()
		}
		for _, p := range t.peers {
			if p != nil {
				p.box.fail(err)
				_ = p.conn.Close()
			}
		}
		t.self.fail(err)
	})
	if f := t.onFail.Load(); first && f != nil {
		(*f)(pe)
	}
}

// Abort fails the job from this rank: every peer's pending and later calls
// fail with a *PeerError naming this rank and reason.
func (t *TCP) Abort(reason error) {
	t.fail(&PeerError{Rank: t.rank, Reporter: -1, Reason: "aborted", Err: reason})
}

func (t *TCP) heartbeats() {
	defer t.wg.Done()
	tick := time.NewTicker(t.cfg.Heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-t.done:
			return
		case now := <-tick.C:
			if t.err() != nil {
				return
			}
			t.beat(now, int64(t.cfg.Heartbeat)/2)
		}
	}
}

// beat sends a heartbeat to each peer that nothing has been written to for
// idle ns.
func (t *TCP) beat(now time.Time, idle int64) {
	var hb [hdrLen]byte
	putHeader(hb[:], frameHeartbeat, Header{}, 0)
	for _, p := range t.peers {
		if p == nil || now.UnixNano()-p.lastWrite.Load() < idle {
			continue
		}
		if p.wmu.TryLock() { // a writer holding the lock is sending data anyway
			_, _ = p.conn.Write(hb[:])
			p.lastWrite.Store(now.UnixNano())
			p.wmu.Unlock()
		}
	}
}

// Close implements Transport. It closes every connection and waits for the
// transport's goroutines to end.
func (t *TCP) Close() error {
	t.closeOnce.Do(t.close)
	return nil
}

func (t *TCP) close() {
	t.closed.Store(true)
	close(t.done)
	var bye [hdrLen]byte
	putHeader(bye[:], frameBye, Header{}, 0)
	for _, p := range t.peers {
		if p == nil {
			continue
		}
		if t.err() == nil {
			_ = p.conn.SetWriteDeadline(time.Now().Add(time.Second))
			p.wmu.Lock()
			_, _ = p.conn.Write(bye[:])
			p.wmu.Unlock()
		}
		_ = p.conn.Close()
	}
	t.wg.Wait()
	for _, p := range t.peers {
		if p != nil {
			p.box.fail(ErrClosed)
		}
	}
	t.self.fail(ErrClosed)
}
