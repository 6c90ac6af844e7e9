//go:build linux

package collectives

import (
	"context"
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
	shmVersion    = 2
	shmHeaderSize = 4096
	shmRecHdr     = hdrLen + 16 // a frame header, the sender's clock and the aux word
	frameRTS      = 5           // a message for the receiver to pull from the sender's memory

	shmPullChunk = 256 << 10 // the most one process_vm_readv copies: the sender sees progress after each
)

// shmCtl is one direction's control block in the segment; each word that
// one side writes has a cache line of its own.
type shmCtl struct {
	tail     atomic.Uint64 // written by the producer: bytes ever published
	_        [120]byte
	head     atomic.Uint64 // written by the consumer: bytes ever consumed
	acks     atomic.Uint64 // written by the consumer: announced messages pulled
	pulled   atomic.Uint64 // written by the consumer: bytes of announced messages pulled, as it goes
	_        [104]byte
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
	yield         bool       // ranks outnumber cores: every poll while spinning first yields the core
	copyOnceMin   int        // 0: never
	rates         *copyRates // measured, when ShmConfig left single copy to the machine
	heartbeat     time.Duration
	peerTimeout   time.Duration
	firstSilence  time.Duration // peerTimeout for a peer that has not beaten yet (TCPConfig.firstSilence)
	maxUnexpected int
}

// resolveShm fills in c's defaults for a rank among localRanks on its
// machine; measure, called only when c leaves single copy to the
// machine, says how fast it copies.
func resolveShm(c ShmConfig, tc TCPConfig, localRanks int, measure func() copyRates) shmConfig {
	tc = tc.withDefaults()
	r := shmConfig{ring: c.RingBytes, spin: c.Spin, copyOnceMin: c.CopyOnceMin,
		heartbeat: tc.Heartbeat, peerTimeout: tc.PeerTimeout, firstSilence: tc.firstSilence, maxUnexpected: tc.MaxUnexpected}
	if r.ring <= 0 {
		r.ring = defaultRing(localRanks, shmRingBudget())
	}
	r.yield = localRanks > runtime.NumCPU()
	switch {
	case r.spin == 0:
		r.spin = defaultShmSpin
	case r.spin < 0:
		r.spin = 0
	}
	switch {
	case r.copyOnceMin == 0:
		rates := measure()
		r.rates = &rates
		switch {
		case !rates.pay():
			r.copyOnceMin = 0
		case r.yield:
			r.copyOnceMin = defaultShmCopyOnceMinCrowded
		default:
			r.copyOnceMin = defaultShmCopyOnceMin
		}
	case r.copyOnceMin < 0:
		r.copyOnceMin = 0
	}
	return r
}

// defaultRing is the ring size of a machine with localRanks ranks: 1 MiB,
// 256 KiB past 16 ranks, and halved until the machine's segments, two
// rings for each of its localRanks*(localRanks-1)/2 pairs, fit in budget
// bytes, down to shmMinRing. Every segment is mapped and touched at set-up,
// so without the bound 256 ranks on one machine would ask for 16 GiB.
func defaultRing(localRanks int, budget int64) int {
	ring := defaultShmRing
	if localRanks > 16 {
		ring = 256 << 10
	}
	pairs := int64(localRanks) * int64(localRanks-1) / 2
	for ring > shmMinRing && pairs*2*int64(ring) > budget {
		ring /= 2
	}
	return ring
}

// shmRingBudget is what a machine's rings may take together: an eighth of
// its memory, at most 1 GiB (1 GiB when the memory cannot be read).
func shmRingBudget() int64 {
	const most = 1 << 30
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil || si.Totalram == 0 {
		return most
	}
	return min(int64(si.Totalram)*int64(si.Unit)/8, most)
}

// copyRates says how fast this machine copies, in bytes per ns: the
// kernel between processes (process_vm_readv), and memcpy.
type copyRates struct {
	kernel, memcpy float64
	err            error // the kernel's copy could not be measured
}

// pay says whether a single copy by the kernel costs less than the two
// copies of a message through a ring: when the kernel copies at least as
// fast as memcpy. With a core per rank the sender copies into the ring
// while the receiver copies out, so a message takes about one memcpy's
// time. When ranks outnumber cores two memcpys cost twice the CPU time of
// one, but a single copy makes its sender wait until the receiver is
// scheduled and has copied it all; on a machine whose kernel copied at
// half memcpy's speed, 4 ranks on 2 cores were as fast through the ring
// at 1 MiB and faster above (docs/collectives.md).
func (c copyRates) pay() bool {
	return c.err == nil && c.kernel > 0 && c.memcpy > 0 && c.kernel >= c.memcpy
}

func (c copyRates) String() string {
	if c.err != nil {
		return "the kernel's copy between processes failed: " + c.err.Error()
	}
	return fmt.Sprintf("the kernel copies %.1f GB/s between processes, memcpy %.1f GB/s", c.kernel, c.memcpy)
}

// shmProbeBytes is what measureCopies copies: the size from which single
// copy would be used, and that fits in a core's cache, as a ring does.
const shmProbeBytes = 1 << 20

// measureCopies times, on this machine, a copy by process_vm_readv (of
// this process's own memory: the kernel's work is the same as from a
// peer's) and a memcpy of shmProbeBytes, each the fastest of a few, so
// that a moment of contention does not decide. It takes about a
// millisecond.
func measureCopies() copyRates {
	src, dst := make([]byte, shmProbeBytes), make([]byte, shmProbeBytes)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // the pages are touched before they are timed
	pid := os.Getpid()
	liov := []unix.Iovec{{Base: &dst[0]}}
	liov[0].SetLen(len(dst))
	riov := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&src[0])), Len: len(src)}}
	best := func(f func() error) (time.Duration, error) {
		b := time.Duration(1 << 62)
		for range 6 {
			t0 := time.Now()
			if err := f(); err != nil {
				return 0, err
			}
			b = min(b, time.Since(t0))
		}
		return max(b, 1), nil
	}
	mem, _ := best(func() error { copy(dst, src); return nil })
	kern, err := best(func() error {
		n, err := unix.ProcessVMReadv(pid, liov, riov, 0)
		if err == nil && n != len(dst) {
			err = io.ErrUnexpectedEOF
		}
		return err
	})
	runtime.KeepAlive(src)
	if err != nil {
		return copyRates{err: err}
	}
	return copyRates{kernel: float64(shmProbeBytes) / float64(kern), memcpy: float64(shmProbeBytes) / float64(mem)}
}

// pause is the turn-th beat of polling, polled for waited so far: it
// lets this process's other goroutines run and, after the first few
// microseconds (at once when ranks outnumber cores), the other processes
// on this core, among them, perhaps, the rank being waited for. A rank
// polling without yielding keeps its core from a peer that shares it, or
// from a process that crowds the machine. While it yields the core, it
// enters the Go scheduler only every shmSchedEvery turns: a turn of the
// Go scheduler costs a quarter of a yield, and mostly finds nothing else
// to run. It reports whether it yielded the core; the caller, which reads
// the clock before each poll, passes the gap it saw after such a pause
// to resumed.
func (t *shmTransport) pause(waited time.Duration, turn int) bool {
	yield := t.cfg.yield || waited >= shmPureSpin
	if !yield || turn%shmSchedEvery == 0 {
		runtime.Gosched()
	}
	if yield {
		syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
	}
	return yield
}

// resumed takes the time between two polls with a yield between them:
// a yield that kept the core away for over shmLongYield means the core
// went to long work, and polling stops paying.
func (t *shmTransport) resumed(gap int64) {
	if gap > int64(shmLongYield) {
		t.spinScore.Store(0)
	}
}

// Polling pays when waits are short: a peer answers within the spin time
// (a benchmark of small messages, a step of a collective between ranks
// that arrived together). It is waste when they are long (ranks that
// arrive at a collective milliseconds apart, as a trainer's do while they
// compute), and worse than waste on a crowded machine, where a task that
// yields goes behind every other for a whole slice while one that sleeps
// and is woken gets its core back soon. So a rank polls as long as its
// recent waits were mostly short (an adaptive spin, as adaptive mutexes
// do): each wait (for a message, ring space, an ack) that ended within
// shmLongWait raises a score, whether it polled or slept, and each that
// lasted longer lowers it four times as much, as does an idle time of the
// progress goroutine that polled until its spin ran out; a yield that
// kept the core away for more than shmLongYield (it went to a program
// that computes, or a peer that does) zeroes it. Below shmSpinMin the
// rank sleeps at once; its progress goroutine polls one idle time in
// shmSpinProbe.
const (
	shmPureSpin   = 5 * time.Microsecond // how long a rank with a core of its own polls without yielding it
	shmPollBurst  = 4                    // polls between pauses while it does not yield
	shmSchedEvery = 4                    // yields of the core per turn of the Go scheduler
	shmLongYield  = time.Millisecond
	shmLongWait   = time.Millisecond
	shmSpinMax    = 16
	shmSpinMin    = 4
	shmSpinProbe  = 16
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

// waited scores a wait that lasted d ns until what it waited for came (a
// message's arrival, ring space, an ack): up to shmLongWait, the peer was
// at the transport, and polling pays; longer, the peer was away (it
// computes), and a wait that polls wastes its spin. A wait's length is
// known whether it polled or slept, so a rank that sleeps at once learns
// as soon as one that polls when polling pays again; and a peer's wake-up
// latency, which makes this rank's waits longer while the peer sleeps, is
// far below shmLongWait, so sleeping ranks do not keep each other asleep.
func (t *shmTransport) waited(d int64) {
	if t.cfg.spin > 0 {
		t.polled(d <= int64(shmLongWait))
	}
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

// stamp is the time now as a time.Time, read with one clock reading (where
// time.Now reads two clocks).
func (t *shmTransport) stamp() time.Time { return t.clock.time(t.clock.now()) }

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
	closing   atomic.Bool // close has begun: the goodbyes are on their way
	stopping  atomic.Bool
	closeOnce sync.Once
	wg        sync.WaitGroup

	spinScore atomic.Int32 // how well polling has paid lately

	// prog is held by whichever goroutine polls the incoming rings: the
	// progress goroutine, or one that waits for a message or a peer and
	// polls while it spins (pollWhile), so that what it waits for is
	// done on its own goroutine, without a hand-off. It guards each
	// link's receiving side and the heartbeats.
	prog sync.Mutex
	// pollers counts the waiting goroutines that poll; while there are
	// any, and none is blocked, the progress goroutine stands aside
	// (parked on resume).
	pollers atomic.Int32
	blocked atomic.Int32  // goroutines blocked on shared memory: the progress goroutine polls for them
	resume  chan struct{} // capacity 1: a goroutine blocks, or the transport stops

	// fallback says why peers that could share memory with this rank
	// are reached through TCP (TransportAuto), for Mesh.ShmFallback.
	fallback error

	// The progress goroutine's own.
	aside      bool // it stands aside: waiting goroutines poll
	asideTimer *time.Timer
	slept      bool
	nextBeat   atomic.Int64 // on clock; written under prog
	idleFrom   int64        // on clock; -1 while busy
	polling    bool         // this idle time polls before it sleeps
	yielded    bool         // it yielded the core after the poll at lastPoll
	lastPoll   int64        // on clock
	turn       int          // pauses in this idle time
	probes     int
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
	wmu      sync.Mutex
	tail     uint64
	headSeen uint64 // the consumer's head as last read
	tickets  uint64 // announced messages
	rec      [shmRecHdr]byte
	pin      runtime.Pinner

	waiting  atomic.Bool   // a sender sleeps on wake
	wake     chan struct{} // capacity 1
	dead     chan struct{} // closed when sends to the peer can no longer succeed
	deadErr  error
	deadOnce sync.Once

	bye      atomic.Bool // the peer said goodbye on the control socket
	ctrlDone chan struct{}

	// The receiving side, under t.prog.
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
	if t.cfg.rates != nil {
		once += " (" + t.cfg.rates.String() + ")"
	}
	return fmt.Sprintf("%d KiB rings, single copy %s, spin %s", t.cfg.ring>>10, once, spin)
}

// start runs the transport's goroutines.
func (t *shmTransport) start() {
	t.pollFn = t.poll
	t.resume = make(chan struct{}, 1)
	t.asideTimer = time.NewTimer(t.cfg.heartbeat)
	t.asideTimer.Stop()
	for _, l := range t.active {
		l.box.poller, l.box.now = t, t.stamp
	}
	now := t.clock.now()
	t.nextBeat.Store(now)
	t.idleFrom = -1
	t.spinScore.Store(shmSpinMax)
	for _, l := range t.active {
		l.myBeat.Add(1) // this rank has joined: its peers allow it the peer timeout from now
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

// send sends p to peer to. It returns ctx's error when ctx ends while it
// waits for space in the ring or for the peer to pull the message: at
// once if nothing of the message is in the ring yet (the link goes on as
// if it had not been called); otherwise the peer has part of it, or may
// still read p, and would wait for the rest forever, so this rank's
// transport fails first, telling every peer that it was interrupted.
func (t *shmTransport) send(ctx context.Context, to int, h Header, p []byte) error {
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
	if err := ctx.Err(); err != nil {
		return err // it waited for the lock
	}
	if l.push && t.cfg.copyOnceMin > 0 && len(p) >= t.cfg.copyOnceMin {
		return l.sendOnce(ctx, h, p)
	}
	return l.sendRing(ctx, h, p)
}

// interrupted fails the transport for a send that ctx ended in the middle
// of a message, and returns ctx's error.
func (l *shmLink) interrupted(ctx context.Context) error {
	l.t.fail(&PeerError{Rank: l.t.rank, Reporter: -1, Reason: fmt.Sprintf("interrupted in the middle of a message to rank %d", l.peer), Err: ctx.Err()})
	return ctx.Err()
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

// free reports whether the outgoing ring has space bytes free, reading
// the consumer's head (a cache line the peer writes) only when the head
// seen last does not leave enough.
func (l *shmLink) free(space uint64) bool {
	size := uint64(len(l.outRing))
	if size-(l.tail-l.headSeen) >= space {
		return true
	}
	l.headSeen = l.out.head.Load()
	return size-(l.tail-l.headSeen) >= space
}

// sendRing copies the message into the ring, in parts as space frees up
// when it does not fit.
func (l *shmLink) sendRing(ctx context.Context, h Header, p []byte) error {
	size := uint64(len(l.outRing))
	if err := l.waitOut(ctx, shmRecHdr, 0); err != nil {
		return err
	}
	l.putRecord(frameData, h, len(p), 0)
	// Parts of at most an eighth of the ring, so that the receiver can
	// start copying out while the rest is copied in.
	part := int(size / 8)
	for off := 0; ; {
		if size-(l.tail-l.headSeen) < uint64(min(part, len(p)-off)) {
			l.headSeen = l.out.head.Load()
		}
		free := size - (l.tail - l.headSeen)
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
			if err := l.waitOut(ctx, 1, 0); err != nil {
				if ctx.Err() != nil {
					return l.interrupted(ctx)
				}
				return err
			}
		}
	}
}

// sendOnce announces the message for the peer to copy out of p, and waits
// until it has.
func (l *shmLink) sendOnce(ctx context.Context, h Header, p []byte) error {
	if err := l.waitOut(ctx, shmRecHdr, 0); err != nil {
		return err
	}
	l.pin.Pin(&p[0])
	defer l.pin.Unpin()
	l.putRecord(frameRTS, h, len(p), uint64(uintptr(unsafe.Pointer(&p[0]))))
	l.publish()
	l.tickets++
	if err := l.waitOut(ctx, 0, l.tickets); err != nil {
		if ctx.Err() != nil {
			return l.interrupted(ctx)
		}
		return err
	}
	return nil
}

// waitOut waits until the outgoing ring has space bytes free and the peer
// has pulled acks announced messages, polling for the spin time first,
// or until the peer fails or ctx ends.
func (l *shmLink) waitOut(ctx context.Context, space, acks uint64) error {
	ready := func() bool { return l.free(space) && (acks == 0 || l.out.acks.Load() >= acks) }
	if ready() {
		return nil
	}
	start := l.t.clock.now()
	err := l.waitOutLong(ctx, ready)
	if err == nil {
		l.t.waited(l.t.clock.now() - start)
	}
	return err
}

// waitOutLong is waitOut once the ring is not ready at once.
func (l *shmLink) waitOutLong(ctx context.Context, ready func() bool) error {
	// While it waits for the peer, this goroutine polls the incoming
	// rings: in an exchange, the peer's message is copied by the time
	// the peer has taken this one.
	stopped := false
	seen := [3]uint64{l.out.head.Load(), l.out.acks.Load(), l.out.pulled.Load()}
	ok := l.t.pollWhile(ctx, func() bool {
		if ready() {
			return true
		}
		select {
		case <-l.dead:
			stopped = true
		case <-ctx.Done():
			stopped = true
		default:
		}
		return stopped
	}, func() bool {
		// The peer drains the ring, or copies the announced message.
		now := [3]uint64{l.out.head.Load(), l.out.acks.Load(), l.out.pulled.Load()}
		moved := now != seen
		seen = now
		return moved
	})
	if ok && !stopped {
		return nil
	}
	l.t.blocking(1)
	defer l.t.blocking(-1)
	select {
	case <-l.dead:
		return l.deadErr
	case <-ctx.Done():
		return ctx.Err()
	default:
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
		case <-ctx.Done():
			l.waiting.Store(false)
			l.out.waiting.Store(0)
			return ctx.Err()
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
		if t.aside {
			// Goroutines that wait poll for themselves. One that gives
			// up and blocks wakes this one, which takes over; meanwhile
			// it keeps the heartbeats.
			t.asideTimer.Reset(t.cfg.heartbeat)
			select {
			case <-t.resume:
				t.aside = false
			case <-t.asideTimer.C:
				t.prog.Lock()
				t.beat(t.clock.now())
				t.prog.Unlock()
				t.aside = t.standAside()
			}
			continue
		}
		_ = t.bell.SetReadDeadline(t.clock.time(t.nextBeat.Load()))
		err := t.bellRC.Read(t.pollFn)
		if t.stopping.Load() {
			return
		}
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			t.fail(&PeerError{Rank: t.rank, Reporter: -1, Reason: "its shared-memory doorbell failed", Err: err})
			return
		}
		if now := t.clock.now(); now >= t.nextBeat.Load() {
			t.prog.Lock()
			t.beat(now)
			t.prog.Unlock()
		}
	}
}

// pollWhile polls the incoming rings on a goroutine that waits, until
// done says its wait is over or the spin time has passed since the wait
// began or anything moved (messages in, or what moving reports); it
// returns done's last answer. A message that arrives meanwhile is copied by the
// waiter itself, which is then already running: no hand-off from the
// progress goroutine (a channel operation and two turns of the Go
// scheduler, which cost more than the copy of a small message). It polls
// only while polling pays (pollsNow's score), and stops when ctx ends.
func (t *shmTransport) pollWhile(ctx context.Context, done, moving func() bool) bool {
	if done() {
		return true
	}
	if t.cfg.spin <= 0 || t.spinScore.Load() < shmSpinMin {
		return false
	}
	t.pollers.Add(1)
	defer t.pollers.Add(-1)
	if t.prog.TryLock() {
		if !t.stopping.Load() {
			t.progress()
		}
		t.prog.Unlock()
		if done() {
			return true
		}
	}
	start := t.clock.now()
	var last int64
	yielded, turn := false, 0
	cancelled := ctx.Done()
	for now := start; ; now = t.clock.now() {
		if yielded {
			t.resumed(now - last)
		}
		waited := time.Duration(now - start)
		// Between yields of the core, a few polls per turn of the clock
		// and the Go scheduler, which cost more than a poll.
		polls := 1
		if !t.cfg.yield && waited < shmPureSpin {
			polls = shmPollBurst
		}
		moved := false
		for range polls {
			if t.prog.TryLock() {
				if !t.stopping.Load() {
					moved = t.progress() || moved
					if now >= t.nextBeat.Load() {
						t.beat(now)
					}
				}
				t.prog.Unlock()
			}
			if done() {
				return true
			}
		}
		if moved || moving != nil && moving() {
			// What it waits for is on its way, or other messages move:
			// the peers are at work, and polling pays. The spin time
			// counts from the last movement.
			start, waited = now, 0
		}
		if waited >= t.cfg.spin {
			return false
		}
		select {
		case <-cancelled:
			return false
		default:
		}
		if t.stopping.Load() {
			return false
		}
		last, yielded = now, t.pause(waited, turn)
		turn++
	}
}

// wakeProgress makes the progress goroutine poll (if it stands aside):
// a goroutine that waits is about to block without polling.
func (t *shmTransport) wakeProgress() {
	select {
	case t.resume <- struct{}{}:
	default:
	}
}

// waitFor is the mailbox's poller: it waits for the receive r, polling
// first, and scores the wait by when its message arrived after the wait
// began (waited), which is known whether this wait polled or slept.
func (t *shmTransport) waitFor(ctx context.Context, r *recvReq) (RecvInfo, error) {
	if len(r.done) != 0 {
		return r.wait(ctx)
	}
	start := t.clock.now()
	var info RecvInfo
	var err error
	if t.pollWhile(ctx, func() bool { return len(r.done) != 0 }, nil) {
		info, err = r.wait(ctx)
	} else {
		t.blocking(1)
		info, err = r.wait(ctx)
		t.blocking(-1)
	}
	if err == nil {
		t.waited(int64(info.Arrived.Sub(t.clock.time(start))))
	}
	return info, err
}

// blocking counts the goroutines blocked on shared memory (n = 1: one
// blocks; -1: it resumes). While there are any, the progress goroutine
// polls: a goroutine that polls for itself may stop at any time.
func (t *shmTransport) blocking(n int32) {
	if t.blocked.Add(n) > 0 && n > 0 {
		t.wakeProgress()
	}
}

// standAside says whether the progress goroutine may leave the polling
// to the goroutines that wait: some poll, and none is blocked.
func (t *shmTransport) standAside() bool {
	return t.pollers.Load() > 0 && t.blocked.Load() == 0
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
		if t.standAside() {
			t.aside, t.idleFrom = true, -1
			return true
		}
		if !t.prog.TryLock() {
			runtime.Gosched() // a waiting goroutine is polling
			continue
		}
		busy := t.progress()
		t.prog.Unlock()
		now := t.clock.now()
		if now >= t.nextBeat.Load() {
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
			t.idleFrom, t.turn = now, 0
			t.polling = t.pollsNow()
		}
		if t.yielded {
			t.resumed(now - t.lastPoll)
			t.yielded = false
		}
		if waited := time.Duration(now - t.idleFrom); t.polling && waited < t.cfg.spin {
			t.lastPoll, t.yielded = now, t.pause(waited, t.turn)
			t.turn++
			continue
		}
		if t.polling {
			t.polled(false)
			t.polling = false
		}
		for _, l := range t.active {
			l.in.sleeping.Store(1)
		}
		t.prog.Lock()
		busy = t.progress()
		t.prog.Unlock()
		if busy || t.standAside() {
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
		completeAt(l.cur, l.arrived, l.t.stamp(), l.curErr)
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
			// The peer may have exited because it aborted for another
			// rank's failure: its abort frame, then waiting on the
			// control socket before the socket's end, names the real
			// culprit.
			select {
			case <-l.ctrlDone:
			case <-time.After(time.Second):
			}
		}
		l.t.fail(pe)
		if r != nil {
			complete(r, arrived, l.t.err())
		}
		return false
	}
	if r != nil {
		completeAt(r, arrived, l.t.stamp(), merr)
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
		// A raw system call: Go's ordinary one would hand this rank's
		// scheduler slot to another thread after 20 µs of copying, and
		// take it back after (docs/collectives.md).
		r, _, e := syscall.RawSyscall6(unix.SYS_PROCESS_VM_READV, uintptr(l.pid),
			uintptr(unsafe.Pointer(&l.liov[0])), 1, uintptr(unsafe.Pointer(&l.riov[0])), 1, 0)
		n, err := int(r), error(nil)
		if e != 0 {
			err = e
		}
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return err
		case n == 0:
			return io.ErrUnexpectedEOF
		}
		off += n
		l.in.pulled.Add(uint64(n)) // the sender sees its message on its way
	}
	l.liov[0].Base = nil
	return nil
}

// beat bumps this rank's heartbeats and checks its peers'.
func (t *shmTransport) beat(now int64) {
	t.nextBeat.Store(now + int64(t.cfg.heartbeat))
	for _, l := range t.active {
		l.myBeat.Add(1)
		if l.gone || l.bye.Load() {
			continue
		}
		if v := l.peerBeat.Load(); v != l.hbSeen {
			l.hbSeen, l.hbAt = v, now
			continue
		}
		limit := t.cfg.peerTimeout
		if l.hbSeen == 0 {
			limit = t.cfg.firstSilence // the peer may still be setting up its other links
		}
		if time.Duration(now-l.hbAt) > limit {
			t.fail(&PeerError{Rank: l.peer, Reporter: -1, Reason: fmt.Sprintf(
				"no data or heartbeat for %v (hung, stopped, or unreachable)", limit)})
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
			if t.closing.Load() || l.bye.Load() || t.err() != nil || errors.Is(err, net.ErrClosed) {
				// This rank is closing, or the peer said goodbye. A peer
				// that closes with this rank's goodbye unread resets the
				// socket, and the reset is read before the peer's own
				// goodbye: while this rank still sends its goodbyes, that
				// is no failure to tell the ranks still running.
				return
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
	if t.bell == nil {
		return // it links no peer: it only says why (joinShm)
	}
	t.closeOnce.Do(func() {
		t.closing.Store(true)
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
		select {
		case t.resume <- struct{}{}:
		default:
		}
		for _, l := range t.active {
			_ = l.ctrl.Close()
		}
		t.wg.Wait()
		t.prog.Lock() // no waiting goroutine is inside the rings
		defer t.prog.Unlock()
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
// memory: the user, the running kernel, the network namespace. It fails
// when /proc does not say (a sandbox that hides it): without the boot id,
// ranks on two machines could take each other for neighbours.
func machineParts() (string, error) {
	const bootID = "/proc/sys/kernel/random/boot_id"
	b, err := os.ReadFile(bootID)
	if err != nil {
		return "", fmt.Errorf("reading the kernel's boot id: %w", err)
	}
	boot := strings.TrimSpace(string(b))
	if boot == "" {
		return "", fmt.Errorf("reading the kernel's boot id: %s is empty", bootID)
	}
	netns, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		return "", fmt.Errorf("reading the network namespace: %w", err)
	}
	return fmt.Sprintf("uid %d boot %s net %s", os.Getuid(), boot, netns), nil
}
