//go:build linux

package collectives

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The shared-memory transport links a rank to each peer on its machine
// through one segment per pair: a memfd (anonymous memory with no name
// anywhere, freed by the kernel when the last process holding it exits,
// SIGKILL included), created by the lower rank and handed to the higher
// one over an authenticated Unix socket (shm_setup_linux.go). The segment
// holds a header page and two rings, one per direction, each with a single
// producer (the sending rank's senders, one at a time) and a single
// consumer (the receiving rank's progress goroutine).
//
// A message is a record in the ring: a frame header as TCP's, the
// sender's CLOCK_MONOTONIC when it wrote it, and an aux word. Small
// messages follow their header in the ring and are copied twice (into the
// ring, out of it into the posted buffer, or into a pooled buffer when
// none is posted). A message of CopyOnceMin bytes or more is announced
// instead (frameRTS, aux its address) and the receiver copies it once,
// straight from the sender's memory into the posted buffer
// (process_vm_readv); the sender waits for the receiver's ack before its
// Send returns. When the kernel does not let one rank read another's
// memory (Yama ptrace_scope, seccomp), large messages stream through the
// ring instead, the receiver copying each part as it arrives.
//
// Each rank has one progress goroutine that polls every incoming ring,
// and one doorbell, an eventfd in Go's network poller. A progress
// goroutine with nothing to do polls for ShmConfig.Spin, then announces in
// each incoming ring that it sleeps and parks on its doorbell; a sender
// rings it (one write) only if it finds that announcement, so a peer that
// is polling costs no system call. Senders waiting for space or an ack
// announce it the same way, in the outgoing ring's control block.
//
// Liveness: each pair keeps its Unix socket as a control channel for
// abort and goodbye frames, and the kernel closes it when a process dies,
// which its peers notice at once. A process that hangs or is stopped
// stops bumping its heartbeat counter in the segment, and its peers give
// up on it after the peer timeout.

const (
	shmMagic      = "CPSHM001"
	shmVersion    = 1
	shmHeaderSize = 4096
	shmRecHdr     = hdrLen + 16 // a frame header, the sender's clock and the aux word
	frameRTS      = 5           // a message for the receiver to pull from the sender's memory

	shmPullChunk = 4 << 20 // the most one process_vm_readv copies
)

// shmCtl is one direction's control block in the segment; each word that
// one side writes has a cache line of its own.
type shmCtl struct {
	tail     atomic.Uint64 // written by the producer: bytes ever published
	_        [120]byte
	head     atomic.Uint64 // written by the consumer: bytes ever consumed
	acks     atomic.Uint64 // written by the consumer: announced messages pulled
	_        [112]byte
	sleeping atomic.Uint32 // the consumer sleeps: the producer rings its doorbell
	_        [124]byte
	waiting  atomic.Uint32 // the producer waits for space or an ack: the consumer rings its doorbell
	_        [124]byte
}

// shmHeader is the segment's first page. Direction 0 is from the lower
// rank to the higher, 1 back; beat[i] is the heartbeat of the lower (0)
// or higher (1) rank.
type shmHeader struct {
	magic     [8]byte
	version   uint32
	ringBytes uint32
	token     [32]byte
	_         [464]byte
	ctl       [2]shmCtl
	beat      [2]struct {
		n atomic.Uint64
		_ [120]byte
	}
}

func init() {
	if unsafe.Sizeof(shmCtl{}) != 512 || unsafe.Sizeof(shmHeader{}) > shmHeaderSize {
		panic("collectives: shared-memory header layout")
	}
}

// shmConfig is ShmConfig resolved for one rank, with the TCP transport's
// liveness settings.
type shmConfig struct {
	ring          int
	spin          time.Duration
	yield         bool // ranks outnumber cores: every poll while spinning first yields the core
	copyOnceMin   int  // 0: never
	heartbeat     time.Duration
	peerTimeout   time.Duration
	maxUnexpected int
}

func resolveShm(c ShmConfig, tc TCPConfig, localRanks int) shmConfig {
	tc = tc.withDefaults()
	r := shmConfig{ring: c.RingBytes, spin: c.Spin, copyOnceMin: c.CopyOnceMin,
		heartbeat: tc.Heartbeat, peerTimeout: tc.PeerTimeout, maxUnexpected: tc.MaxUnexpected}
	if r.ring <= 0 {
		r.ring = defaultShmRing
		if localRanks > 16 {
			r.ring = 256 << 10
		}
	}
	r.yield = localRanks > runtime.NumCPU()
	switch {
	case r.spin == 0:
		r.spin = defaultShmSpin
	case r.spin < 0:
		r.spin = 0
	}
	switch {
	case r.copyOnceMin == 0 && r.yield:
		r.copyOnceMin = defaultShmCopyOnceMinCrowded
	case r.copyOnceMin == 0:
		r.copyOnceMin = defaultShmCopyOnceMin
	case r.copyOnceMin < 0:
		r.copyOnceMin = 0
	}
	return r
}

// pause is one beat of polling, polled for waited so far: it lets this
// process's other goroutines run and, after the first few microseconds
// (at once when ranks outnumber cores), the other processes on this core,
// among them, perhaps, the rank being waited for. A rank polling without
// yielding keeps its core from a peer that shares it, or from a process
// that crowds the machine.
func (t *shmTransport) pause(waited time.Duration) {
	runtime.Gosched()
	if t.cfg.yield || waited >= shmPureSpin {
		t0 := t.clock.now()
		syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
		if t.clock.now()-t0 > int64(shmLongYield) {
			t.spinScore.Store(0) // the core went to long work: stop polling
		}
	}
}

// Polling pays when waits are short: a peer answers within the spin time
// (a benchmark of small messages, a step of a collective between ranks
// that arrived together). It is waste when they are long (ranks that
// arrive at a collective milliseconds apart, as a trainer's do while they
// compute), and worse than waste on a crowded machine, where a task that
// yields goes behind every other for a whole slice while one that sleeps
// and is woken gets its core back soon. So a rank polls as long as its
// recent polls mostly ended in work (an adaptive spin, as adaptive
// mutexes do): each poll that found work raises a score, each that ran
// out of time lowers it four times as much, a yield that kept the core
// away for more than shmLongYield (it went to a program that computes, or
// a peer that does) zeroes it, and below shmSpinMin the rank sleeps at
// once, polling only one wait in shmSpinProbe to find out whether polling
// pays again.
const (
	shmPureSpin  = 5 * time.Microsecond // how long a rank with a core of its own polls without yielding it
	shmLongYield = time.Millisecond
	shmSpinMax   = 16
	shmSpinMin   = 4
	shmSpinProbe = 16
)

// pollsNow decides whether the wait starting now polls first.
func (t *shmTransport) pollsNow() bool {
	if t.cfg.spin <= 0 {
		return false
	}
	if t.spinScore.Load() >= shmSpinMin {
		return true
	}
	t.probes++
	return t.probes%shmSpinProbe == 0
}

// polled scores a poll that found work (ok) or ran out of time.
func (t *shmTransport) polled(ok bool) {
	s := t.spinScore.Load()
	if ok {
		s = min(s+1, shmSpinMax)
	} else {
		s = max(s-4, 0)
	}
	t.spinScore.Store(s)
}

// monoClock converts between this process's time.Time and the machine's
// CLOCK_MONOTONIC, which every process on it reads alike: senders stamp a
// record with it, so a receiver knows when a message reached its memory
// however late its progress goroutine ran.
type monoClock struct {
	base time.Time
	mono int64 // CLOCK_MONOTONIC ns at base
}

func newMonoClock() monoClock {
	var c monoClock
	best := time.Duration(1 << 62)
	for range 5 {
		var ts unix.Timespec
		t0 := time.Now()
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
			continue
		}
		d := time.Since(t0)
		if d < best {
			best = d
			c.base, c.mono = t0.Add(d/2), ts.Nano()
		}
	}
	return c
}

func (c *monoClock) now() int64 { return c.mono + int64(time.Since(c.base)) }

func (c *monoClock) time(mono int64) time.Time { return c.base.Add(time.Duration(mono - c.mono)) }

// shmTransport is a rank's shared-memory links.
type shmTransport struct {
	rank, size int
	cfg        shmConfig
	clock      monoClock
	links      []*shmLink // by rank; nil where a peer is not reached through shared memory
	active     []*shmLink
	bell       *os.File // this rank's doorbell: an eventfd its peers write
	bellFD     int
	bellRC     syscall.RawConn
	pollFn     func(fd uintptr) bool
	onFail     func(*PeerError)

	failOnce  sync.Once
	failErr   atomic.Pointer[error]
	closed    atomic.Bool
	stopping  atomic.Bool
	closeOnce sync.Once
	wg        sync.WaitGroup

	spinScore atomic.Int32 // how well polling has paid lately (written by the progress goroutine)

	// The progress goroutine's own.
	slept    bool
	nextBeat int64 // on clock
	idleFrom int64 // on clock; -1 while busy
	polling  bool  // this idle time polls before it sleeps
	probes   int
}

// shmLink is the link to one peer.
type shmLink struct {
	t        *shmTransport
	peer     int
	pid      int // the peer's pid as this process sees it (0: unknown)
	mem      []byte
	hdr      *shmHeader
	out, in  *shmCtl
	outRing  []byte
	inRing   []byte
	mask     uint64
	myBeat   *atomic.Uint64
	peerBeat *atomic.Uint64
	ctrl     *net.UnixConn
	ctrlMu   sync.Mutex
	peerBell int  // the peer's doorbell
	pull     bool // this rank can read the peer's memory: it pulls the peer's large messages
	push     bool // the peer can read this rank's: large messages are announced, not copied
	box      *mailbox

	// The sending side, under wmu.
	wmu     sync.Mutex
	tail    uint64
	tickets uint64 // announced messages
	rec     [shmRecHdr]byte
	pin     runtime.Pinner

	waiting  atomic.Bool   // a sender sleeps on wake
	wake     chan struct{} // capacity 1
	dead     chan struct{} // closed when sends to the peer can no longer succeed
	deadErr  error
	deadOnce sync.Once

	bye      atomic.Bool // the peer said goodbye on the control socket
	ctrlDone chan struct{}

	// The receiving side: the progress goroutine's own.
	head     uint64
	busy     bool // inside a message whose payload streams through the ring
	cur      *recvReq
	curBuf   *[]byte
	curH     Header
	curErr   error
	curDst   []byte
	curOff   int
	arrived  time.Time
	seenHead uint64
	seenAcks uint64
	hbSeen   uint64
	hbAt     int64
	gone     bool // failed, or said goodbye and was drained
	liov     [1]unix.Iovec
	riov     [1]unix.RemoteIovec
}

func (t *shmTransport) err() error {
	if p := t.failErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (t *shmTransport) describe() string {
	pull := 0
	for _, l := range t.active {
		if l.pull {
			pull++
		}
	}
	spin := "never"
	if t.cfg.spin > 0 {
		spin = t.cfg.spin.String()
	}
	once := "never"
	if t.cfg.copyOnceMin > 0 && pull > 0 {
		once = fmt.Sprintf("from %d bytes", t.cfg.copyOnceMin)
		if pull < len(t.active) {
			once += fmt.Sprintf(" from %d of them", pull)
		}
	}
	return fmt.Sprintf("%d KiB rings, single copy %s, spin %s", t.cfg.ring>>10, once, spin)
}

// start runs the transport's goroutines.
func (t *shmTransport) start() {
	t.pollFn = t.poll
	now := t.clock.now()
	t.nextBeat, t.idleFrom = now, -1
	t.spinScore.Store(shmSpinMax)
	for _, l := range t.active {
		l.hbSeen, l.hbAt = l.peerBeat.Load(), now
		t.wg.Add(1)
		go l.readCtrl()
	}
	t.wg.Add(1)
	go t.run()
}

func ringCopyIn(ring []byte, mask, pos uint64, p []byte) {
	i := pos & mask
	if n := copy(ring[i:], p); n < len(p) {
		copy(ring, p[n:])
	}
}

func ringCopyOut(dst, ring []byte, mask, pos uint64) {
	i := pos & mask
	if n := copy(dst, ring[i:]); n < len(dst) {
		copy(dst[n:], ring)
	}
}

// ringBell wakes the rank whose doorbell fd is.
func ringBell(fd int) {
	var one = [8]byte{1}
	for {
		_, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&one[0])), 8)
		if e != syscall.EINTR {
			return // EAGAIN: the counter is full, so it is readable anyway
		}
	}
}

// send sends p to peer to.
func (t *shmTransport) send(to int, h Header, p []byte) error {
	l := t.links[to]
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if t.closed.Load() {
		return ErrClosed
	}
	if err := t.err(); err != nil {
		return err
	}
	select {
	case <-l.dead:
		return l.deadErr
	default:
	}
	if l.push && t.cfg.copyOnceMin > 0 && len(p) >= t.cfg.copyOnceMin {
		return l.sendOnce(h, p)
	}
	return l.sendRing(h, p)
}

// putRecord writes a record header at the producer's tail without
// publishing it.
func (l *shmLink) putRecord(typ byte, h Header, n int, aux uint64) {
	putHeader(l.rec[:], typ, h, n)
	binary.LittleEndian.PutUint64(l.rec[hdrLen:], uint64(l.t.clock.now()))
	binary.LittleEndian.PutUint64(l.rec[hdrLen+8:], aux)
	ringCopyIn(l.outRing, l.mask, l.tail, l.rec[:])
	l.tail += shmRecHdr
}

// publish makes everything written visible to the peer, and wakes it if
// it sleeps.
func (l *shmLink) publish() {
	// Tell the race detector that what the receiver reads next was
	// written before: it cannot see through shared memory.
	raceReleaseIO()
	l.out.tail.Store(l.tail)
	if l.out.sleeping.Load() != 0 && l.out.sleeping.Swap(0) != 0 {
		ringBell(l.peerBell)
	}
}

// sendRing copies the message into the ring, in parts as space frees up
// when it does not fit.
func (l *shmLink) sendRing(h Header, p []byte) error {
	size := uint64(len(l.outRing))
	if err := l.waitOut(shmRecHdr, 0); err != nil {
		return err
	}
	l.putRecord(frameData, h, len(p), 0)
	// Parts of at most an eighth of the ring, so that the receiver can
	// start copying out while the rest is copied in.
	part := int(size / 8)
	for off := 0; ; {
		free := size - (l.tail - l.out.head.Load())
		if k := min(int(free), len(p)-off, part); k > 0 {
			ringCopyIn(l.outRing, l.mask, l.tail, p[off:off+k])
			l.tail += uint64(k)
			off += k
		}
		l.publish()
		if off == len(p) {
			return nil
		}
		if free == 0 {
			if err := l.waitOut(1, 0); err != nil {
				return err
			}
		}
	}
}

// sendOnce announces the message for the peer to copy out of p, and waits
// until it has.
func (l *shmLink) sendOnce(h Header, p []byte) error {
	if err := l.waitOut(shmRecHdr, 0); err != nil {
		return err
	}
	l.pin.Pin(&p[0])
	defer l.pin.Unpin()
	l.putRecord(frameRTS, h, len(p), uint64(uintptr(unsafe.Pointer(&p[0]))))
	l.publish()
	l.tickets++
	return l.waitOut(0, l.tickets)
}

// waitOut waits until the outgoing ring has space bytes free and the peer
// has pulled acks announced messages, polling for the spin time first.
func (l *shmLink) waitOut(space, acks uint64) error {
	size := uint64(len(l.outRing))
	ready := func() bool {
		return size-(l.tail-l.out.head.Load()) >= space && l.out.acks.Load() >= acks
	}
	if ready() {
		return nil
	}
	if l.t.cfg.spin > 0 && l.t.spinScore.Load() >= shmSpinMin {
		start := l.t.clock.now()
		for now := start; now-start < int64(l.t.cfg.spin); now = l.t.clock.now() {
			l.t.pause(time.Duration(now - start))
			if ready() {
				return nil
			}
			select {
			case <-l.dead:
				return l.deadErr
			default:
			}
		}
	}
	for {
		l.waiting.Store(true)
		l.out.waiting.Store(1)
		if ready() {
			l.waiting.Store(false)
			l.out.waiting.Store(0)
			return nil
		}
		select {
		case <-l.wake:
		case <-l.dead:
			l.waiting.Store(false)
			return l.deadErr
		}
		l.waiting.Store(false)
		if ready() {
			return nil
		}
	}
}

// markDead fails every send to the peer, now and later, with err.
func (l *shmLink) markDead(err error) {
	l.deadOnce.Do(func() {
		l.deadErr = err
		close(l.dead)
	})
}

// run is the progress goroutine: it polls the incoming rings inside the
// doorbell's poller callback, and keeps the heartbeats between polls.
func (t *shmTransport) run() {
	defer t.wg.Done()
	for !t.stopping.Load() {
		_ = t.bell.SetReadDeadline(t.clock.time(t.nextBeat))
		err := t.bellRC.Read(t.pollFn)
		if t.stopping.Load() {
			return
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			t.fail(&PeerError{Rank: t.rank, Reporter: -1, Reason: "its shared-memory doorbell failed", Err: err})
			return
		}
		if now := t.clock.now(); now >= t.nextBeat {
			t.beat(now)
		}
	}
}

// poll is the doorbell's poller callback: it returns false to sleep until
// the doorbell rings, true to return to run.
func (t *shmTransport) poll(fd uintptr) bool {
	if t.slept {
		t.slept = false
		for _, l := range t.active {
			l.in.sleeping.Store(0)
		}
		var b [8]byte
		_, _, _ = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[0])), 8)
	}
	for {
		if t.stopping.Load() {
			return true
		}
		busy := t.progress()
		now := t.clock.now()
		if now >= t.nextBeat {
			return true
		}
		if busy {
			// Let the goroutines whose receives just completed run (a
			// rank often has one scheduler slot): the next message can
			// wait the few hundred nanoseconds.
			if t.idleFrom >= 0 && t.polling {
				t.polled(true)
			}
			t.idleFrom = -1
			runtime.Gosched()
			continue
		}
		if t.idleFrom < 0 {
			t.idleFrom = now
			t.polling = t.pollsNow()
		}
		if waited := time.Duration(now - t.idleFrom); t.polling && waited < t.cfg.spin {
			t.pause(waited)
			continue
		}
		if t.polling {
			t.polled(false)
			t.polling = false
		}
		for _, l := range t.active {
			l.in.sleeping.Store(1)
		}
		if t.progress() {
			for _, l := range t.active {
				l.in.sleeping.Store(0)
			}
			t.idleFrom = -1
			continue
		}
		t.slept = true
		t.idleFrom = -1
		return false
	}
}

// progress polls every link once and reports whether anything moved.
func (t *shmTransport) progress() bool {
	if err := t.err(); err != nil {
		for _, l := range t.active {
			if !l.gone {
				l.gone = true
				l.abandon(err)
			}
		}
		return false
	}
	did := false
	for _, l := range t.active {
		if l.gone {
			continue
		}
		if l.pollIn() {
			did = true
		}
		if l.waiting.Load() {
			if h, a := l.out.head.Load(), l.out.acks.Load(); h != l.seenHead || a != l.seenAcks {
				l.seenHead, l.seenAcks = h, a
				select {
				case l.wake <- struct{}{}:
				default:
				}
			}
		}
		if l.bye.Load() && !l.busy && l.head == l.in.tail.Load() {
			// Everything the peer sent before its goodbye is delivered.
			l.gone = true
			pe := &PeerError{Rank: l.peer, Reporter: -1, Reason: "closed its transport"}
			l.markDead(pe)
			l.box.fail(pe)
		}
	}
	return did
}

// pollIn consumes what the peer has published.
func (l *shmLink) pollIn() bool {
	tail := l.in.tail.Load()
	if tail == l.head {
		return false
	}
	raceAcquireIO()
	for l.head != tail && !l.gone {
		if !l.busy {
			// Producers publish a record header whole.
			var rec [shmRecHdr]byte
			ringCopyOut(rec[:], l.inRing, l.mask, l.head)
			l.head += shmRecHdr
			typ, h, n, ok := parseHeader(rec[:])
			if !ok || n > maxPayload || (typ != frameData && typ != frameRTS) {
				l.t.fail(&PeerError{Rank: l.peer, Reporter: -1, Reason: "wrote a malformed record in shared memory (is it running the same commprof version?)"})
				return true
			}
			arrived := l.t.clock.time(int64(binary.LittleEndian.Uint64(rec[hdrLen:])))
			ok = true
			if typ == frameRTS {
				ok = l.pullMessage(h, int(n), binary.LittleEndian.Uint64(rec[hdrLen+8:]), arrived)
			} else {
				ok = l.startMessage(h, int(n), arrived)
			}
			if !ok {
				return true // the transport failed
			}
			continue
		}
		k := min(int(tail-l.head), len(l.curDst)-l.curOff)
		ringCopyOut(l.curDst[l.curOff:l.curOff+k], l.inRing, l.mask, l.head)
		l.head += uint64(k)
		l.curOff += k
		if l.curOff == len(l.curDst) {
			l.finishMessage()
		}
	}
	l.in.head.Store(l.head)
	if l.in.waiting.Load() != 0 && l.in.waiting.Swap(0) != 0 {
		ringBell(l.peerBell)
	}
	return true
}

// startMessage begins a message whose payload follows in the ring: into
// the receive posted for it, or into a pooled buffer.
func (l *shmLink) startMessage(h Header, n int, arrived time.Time) bool {
	l.curH, l.arrived, l.curOff = h, arrived, 0
	if r := l.box.claim(h); r != nil {
		l.cur = r
		if err := check(l.peer, r.h, len(r.buf), h, n); err != nil {
			l.curErr = err
			l.curBuf = getPayload(n) // the payload is read and dropped
			l.curDst = *l.curBuf
		} else {
			l.curDst = r.buf
		}
	} else {
		if n > l.t.cfg.maxUnexpected {
			l.t.fail(&PeerError{Rank: l.peer, Reporter: -1, Reason: fmt.Sprintf(
				"sent a %d-byte message (%s #%d) before this rank posted its receive; at most %d bytes are buffered",
				n, h.Op, h.Seq, l.t.cfg.maxUnexpected)})
			return false
		}
		l.curBuf = getPayload(n)
		l.curDst = *l.curBuf
	}
	if n == 0 {
		l.finishMessage()
		return true
	}
	l.busy = true
	return true
}

func (l *shmLink) finishMessage() {
	switch {
	case l.cur != nil:
		if l.curBuf != nil {
			putPayload(l.curBuf)
		}
		complete(l.cur, l.arrived, l.curErr)
	default:
		l.box.deliver(l.curH, *l.curBuf, l.curBuf, l.arrived)
	}
	l.busy, l.cur, l.curBuf, l.curDst, l.curErr = false, nil, nil, nil, nil
}

// pullMessage copies an announced message out of the peer's memory, into
// the receive posted for it or a pooled buffer, and acks it.
func (l *shmLink) pullMessage(h Header, n int, addr uint64, arrived time.Time) bool {
	r := l.box.claim(h)
	var buf *[]byte
	dst := []byte(nil)
	var merr error
	switch {
	case r != nil:
		if merr = check(l.peer, r.h, len(r.buf), h, n); merr == nil {
			dst = r.buf
		}
	case n > l.t.cfg.maxUnexpected:
		l.t.fail(&PeerError{Rank: l.peer, Reporter: -1, Reason: fmt.Sprintf(
			"sent a %d-byte message (%s #%d) before this rank posted its receive; at most %d bytes are buffered",
			n, h.Op, h.Seq, l.t.cfg.maxUnexpected)})
		return false
	default:
		buf = getPayload(n)
		dst = *buf
	}
	var err error
	if dst != nil {
		err = l.pullInto(dst, addr)
	}
	l.in.acks.Add(1)
	if l.in.waiting.Load() != 0 && l.in.waiting.Swap(0) != 0 {
		ringBell(l.peerBell)
	}
	if err != nil {
		if buf != nil {
			putPayload(buf)
		}
		pe := &PeerError{Rank: l.peer, Reporter: -1, Reason: "its message could not be copied from its memory", Err: err}
		if errors.Is(err, syscall.ESRCH) {
			pe.Reason, pe.Err = "connection closed (the process exited or was killed)", nil
		}
		l.t.fail(pe)
		if r != nil {
			complete(r, arrived, l.t.err())
		}
		return false
	}
	if r != nil {
		complete(r, arrived, merr)
		return true
	}
	l.box.deliver(h, *buf, buf, arrived)
	return true
}

// pullInto copies len(dst) bytes at the peer's address addr into dst.
func (l *shmLink) pullInto(dst []byte, addr uint64) error {
	for off := 0; off < len(dst); {
		k := min(len(dst)-off, shmPullChunk)
		l.liov[0].Base = &dst[off]
		l.liov[0].SetLen(k)
		l.riov[0] = unix.RemoteIovec{Base: uintptr(addr) + uintptr(off), Len: k}
		n, err := unix.ProcessVMReadv(l.pid, l.liov[:], l.riov[:], 0)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return err
		case n == 0:
			return io.ErrUnexpectedEOF
		}
		off += n
	}
	l.liov[0].Base = nil
	return nil
}

// beat bumps this rank's heartbeats and checks its peers'.
func (t *shmTransport) beat(now int64) {
	t.nextBeat = now + int64(t.cfg.heartbeat)
	for _, l := range t.active {
		l.myBeat.Add(1)
		if l.gone || l.bye.Load() {
			continue
		}
		if v := l.peerBeat.Load(); v != l.hbSeen {
			l.hbSeen, l.hbAt = v, now
			continue
		}
		if time.Duration(now-l.hbAt) > t.cfg.peerTimeout {
			t.fail(&PeerError{Rank: l.peer, Reporter: -1, Reason: fmt.Sprintf(
				"no data or heartbeat for %v (hung, stopped, or unreachable)", t.cfg.peerTimeout)})
			return
		}
	}
}

// readCtrl reads the control socket: abort and goodbye frames, and the end
// of the socket when the peer's process ends.
func (l *shmLink) readCtrl() {
	t := l.t
	defer t.wg.Done()
	defer close(l.ctrlDone)
	buf := make([]byte, hdrLen+4+1024)
	for {
		n, err := l.ctrl.Read(buf)
		if err == nil && n == 0 {
			err = io.EOF
		}
		if err != nil {
			if t.closed.Load() || l.bye.Load() || t.err() != nil || errors.Is(err, net.ErrClosed) {
				return // this rank closed it, or the peer said goodbye
			}
			reason := "connection closed (the process exited or was killed)"
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				reason = "its control socket failed"
			} else {
				err = nil
			}
			t.fail(&PeerError{Rank: l.peer, Reporter: -1, Reason: reason, Err: err})
			return
		}
		typ, _, plen, ok := parseHeader(buf[:min(n, hdrLen)])
		if n < hdrLen || !ok || plen != uint64(n-hdrLen) {
			t.fail(&PeerError{Rank: l.peer, Reporter: -1, Reason: "sent a malformed frame on its control socket"})
			return
		}
		switch typ {
		case frameBye:
			l.bye.Store(true)
			ringBell(t.bellFD)
		case frameAbort:
			p := buf[hdrLen:n]
			if len(p) < 4 {
				t.fail(&PeerError{Rank: l.peer, Reporter: -1, Reason: "sent a malformed frame (an abort without a rank)"})
				return
			}
			cause := int(int32(binary.LittleEndian.Uint32(p)))
			if cause < 0 || cause >= t.size {
				t.fail(&PeerError{Rank: l.peer, Reporter: -1, Reason: "sent a malformed frame (an abort naming no rank)"})
				return
			}
			pe := &PeerError{Rank: cause, Reporter: l.peer, Reason: string(p[4:])}
			if cause == l.peer {
				pe.Reporter = -1
			}
			t.fail(pe)
			return
		default:
			t.fail(&PeerError{Rank: l.peer, Reporter: -1, Reason: fmt.Sprintf("sent unknown frame type %d on its control socket", typ)})
			return
		}
	}
}

// writeCtrl sends one frame on the control socket.
func (l *shmLink) writeCtrl(frame []byte, d time.Duration) {
	l.ctrlMu.Lock()
	defer l.ctrlMu.Unlock()
	_ = l.ctrl.SetWriteDeadline(time.Now().Add(d))
	_, _ = l.ctrl.Write(frame)
}

// fail records the first failure, tells every peer on shared memory (but
// the culprit and whoever reported it), and fails every pending and later
// call to them.
func (t *shmTransport) fail(pe *PeerError) {
	first := false
	t.failOnce.Do(func() {
		first = true
		var err error = pe
		t.failErr.Store(&err)
		var frame [hdrLen + 4 + 512]byte
		reason := pe.Reason
		if pe.Err != nil {
			reason += ": " + pe.Err.Error()
		}
		n := 4 + copy(frame[hdrLen+4:], reason)
		putHeader(frame[:], frameAbort, Header{}, n)
		binary.LittleEndian.PutUint32(frame[hdrLen:], uint32(int32(pe.Rank)))
		for _, l := range t.active {
			if l.peer != pe.Rank && l.peer != pe.Reporter && !t.closed.Load() {
				l.writeCtrl(frame[:hdrLen+n], 500*time.Millisecond)
			}
		}
		for _, l := range t.active {
			l.markDead(err)
			l.box.fail(err)
			_ = l.ctrl.Close()
		}
	})
	if first && t.onFail != nil {
		t.onFail(pe)
	}
}

// close says goodbye to every peer, stops the goroutines and releases the
// segments and descriptors.
func (t *shmTransport) close() {
	t.closeOnce.Do(func() {
		if t.err() == nil {
			var bye [hdrLen]byte
			putHeader(bye[:], frameBye, Header{}, 0)
			for _, l := range t.active {
				// Once this rank's sends to the peer have returned: the
				// peer reads what is in the ring before it takes the
				// goodbye. A send stuck on a peer that no longer reads
				// gets no goodbye after it.
				if lockWithin(&l.wmu, time.Second) {
					l.writeCtrl(bye[:], time.Second)
					l.wmu.Unlock()
				}
			}
		}
		t.closed.Store(true)
		for _, l := range t.active {
			l.markDead(ErrClosed) // releases senders waiting on the peer
		}
		t.stopping.Store(true)
		ringBell(t.bellFD)
		for _, l := range t.active {
			_ = l.ctrl.Close()
		}
		t.wg.Wait()
		for _, l := range t.active {
			l.abandon(ErrClosed)
			l.box.fail(ErrClosed)
			l.wmu.Lock() // no sender is inside the segment
			_ = unix.Munmap(l.mem)
			l.mem, l.outRing, l.inRing = nil, nil, nil
			_ = unix.Close(l.peerBell)
			l.wmu.Unlock()
		}
		_ = t.bell.Close()
	})
}

// lockWithin takes mu if it can within d.
func lockWithin(mu *sync.Mutex, d time.Duration) bool {
	for end := time.Now().Add(d); ; {
		if mu.TryLock() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// abandon fails the message being received, if any: the transport failed
// or closed in the middle of it.
func (l *shmLink) abandon(err error) {
	if l.cur != nil {
		if l.curBuf != nil {
			putPayload(l.curBuf)
		}
		complete(l.cur, time.Time{}, err)
	} else if l.curBuf != nil {
		putPayload(l.curBuf)
	}
	l.busy, l.cur, l.curBuf, l.curDst, l.curErr = false, nil, nil, nil, nil
}

// machineParts is what identifies a machine whose processes can share
// memory: the user, the running kernel, the network namespace.
func machineParts() string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	netns, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return ""
	}
	return fmt.Sprintf("uid %d boot %s net %s", os.Getuid(), strings.TrimSpace(string(boot)), netns)
}
