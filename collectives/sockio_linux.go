//go:build linux

package collectives

import (
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strings"
	"syscall"
	"unsafe"

	"github.com/commprof/commprof/internal/envnames"
)

// sockIO reads and writes one connection's socket, through the net package
// or, when raw is set, with raw system calls.
//
// The Go runtime brackets an ordinary system call with entersyscall and
// exitsyscall, and its sysmon thread, woken every 20 µs while system calls
// run, takes the P of a call that lasts longer (as copying a large payload
// through a loopback socket does) and hands it to another thread, which
// must give it back afterwards. Every hand-over is a futex wake-up. When
// ranks outnumber cores, those threads and wake-ups compete with the ranks
// themselves: over 300 allreduces of 2 MiB on 4 ranks sharing 2 cores, raw
// calls took the ranks from 7,256 futex and 16,020 nanosleep calls to 306
// and 1,000, and raised busbw and cut small-message latency
// (docs/benchmarks.md). With a core per rank the ordinary path measured
// better for small messages, and it is the raw writes that cost there:
// RawLarge makes every read raw and only writes of large payloads
// (TCPConfig.RawIO).
//
// The socket is non-blocking, so a raw call never sleeps: one that would
// block returns EAGAIN and the goroutine waits in the network poller, with
// the connection's deadlines, as the net package's own calls do. Each call
// moves at most maxRawIO bytes, which bounds how long a goroutine keeps
// its P (and holds off the garbage collector's stop-the-world).
type sockIO struct {
	c        *net.TCPConn
	rc       syscall.RawConn
	rawRead  bool
	rawWrite int // the smallest payload written with a raw call
	nw       *netWrite
	rw       *rawWrite // under the peer's write lock
	rr       *rawRead  // by the connection's reader goroutine only
}

const (
	maxRawIO   = 4 << 20
	largeRawIO = 64 << 10 // RawLarge's smallest raw write
)

func newSockIO(c *net.TCPConn, mode RawIO) (sockIO, error) {
	rc, err := c.SyscallConn()
	s := sockIO{c: c, rc: rc, rawRead: mode != RawOff, rawWrite: math.MaxInt,
		nw: new(netWrite), rw: new(rawWrite), rr: new(rawRead)}
	switch mode {
	case RawOn:
		s.rawWrite = 0
	case RawLarge:
		s.rawWrite = largeRawIO
	}
	// The callbacks the poller calls are made once, so that a message
	// allocates nothing.
	s.rw.fn, s.rr.fn = s.rw.try, s.rr.try
	return s, err
}

// writev writes hdr then p, all of them, waiting whenever the socket's
// buffer is full.
func (s sockIO) writev(hdr, p []byte) error {
	// Raw reads tell the race detector they see what was written before
	// a write on this fd, whichever path made it.
	raceReleaseIO()
	if len(p) < s.rawWrite {
		return s.nw.writev(s.c, hdr, p)
	}
	w := s.rw
	w.hdr, w.p, w.errno = hdr, p, 0
	err := s.rc.Write(w.fn)
	w.hdr, w.p = nil, nil
	if err != nil {
		return err
	}
	if w.errno != 0 {
		return w.errno
	}
	return nil
}

// rawWrite is the state of one raw writev.
type rawWrite struct {
	hdr, p []byte
	errno  syscall.Errno
	fn     func(fd uintptr) bool
}

// try writes what the socket takes; false sends the caller to wait in
// the poller until it takes more.
func (w *rawWrite) try(fd uintptr) bool {
	for len(w.hdr) > 0 || len(w.p) > 0 {
		var iov [2]syscall.Iovec
		k := 0
		if len(w.hdr) > 0 {
			iov[k].Base = &w.hdr[0]
			iov[k].SetLen(len(w.hdr))
			k++
		}
		if len(w.p) > 0 {
			iov[k].Base = &w.p[0]
			iov[k].SetLen(min(len(w.p), maxRawIO))
			k++
		}
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(k))
		switch e {
		case 0:
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			w.errno = e
			return true
		}
		n := int(r)
		h := min(n, len(w.hdr))
		w.hdr, w.p = w.hdr[h:], w.p[n-h:]
	}
	return true
}

// read reads up to len(p) bytes, waiting until some have arrived; io.EOF
// when the peer has closed the connection.
func (s sockIO) read(p []byte) (int, error) {
	if !s.rawRead {
		return s.c.Read(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	r := s.rr
	r.p, r.n, r.errno = p[:min(len(p), maxRawIO)], 0, 0
	err := s.rc.Read(r.fn)
	r.p = nil
	switch {
	case err != nil:
		return 0, err
	case r.errno != 0:
		return 0, r.errno
	case r.n == 0:
		return 0, io.EOF
	}
	raceAcquireIO()
	return r.n, nil
}

// rawRead is the state of one raw read.
type rawRead struct {
	p     []byte
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool
}

// try reads what has arrived; false sends the caller to wait in the
// poller for data.
func (r *rawRead) try(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.p[0])), uintptr(len(r.p)))
		switch e {
		case 0:
			r.n = int(n)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			r.errno = e
			return true
		}
	}
}

// congestionControl returns a Control function (a dialer's, a listener's,
// or NewTCP's for a connected socket) that sets a socket's congestion
// control as TCPConfig's Congestion says: nothing for "system", best
// effort for commprof's choice, an error for an algorithm asked for that
// the host does not have or allow.
func congestionControl(name string) func(network, address string, c syscall.RawConn) error {
	strict := true
	switch name {
	case "system":
		return nil
	case "":
		name, strict = DefaultCongestion, false
	}
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptString(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CONGESTION, name)
		}); err != nil {
			return err
		}
		if serr != nil && strict {
			return congestionError(name, serr)
		}
		return nil
	}
}

// congestionError says why the host refused a congestion control.
func congestionError(name string, err error) error {
	why := err.Error()
	switch err {
	case syscall.ENOENT:
		why = "this host does not have it (it has those in /proc/sys/net/ipv4/tcp_available_congestion_control)"
	case syscall.EPERM:
		why = "this host does not allow it to this user (it allows those in /proc/sys/net/ipv4/tcp_allowed_congestion_control)"
	}
	return fmt.Errorf("TCP congestion control %q (%s): %s", name, envnames.TCPCongestion, why)
}

// hostCongestion returns the host's default congestion control, or "".
func hostCongestion() string {
	b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
