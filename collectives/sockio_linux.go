//go:build linux

package collectives

import (
	"io"
	"net"
	"syscall"
	"unsafe"
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
// better for small messages, so raw calls are used only when asked
// (TCPConfig.RawIO).
//
// The socket is non-blocking, so a raw call never sleeps: one that would
// block returns EAGAIN and the goroutine waits in the network poller, with
// the connection's deadlines, as the net package's own calls do. Each call
// moves at most maxRawIO bytes, which bounds how long a goroutine keeps
// its P (and holds off the garbage collector's stop-the-world).
type sockIO struct {
	c   *net.TCPConn
	rc  syscall.RawConn
	raw bool
	nw  *netWrite
	rw  *rawWrite // under the peer's write lock
	rr  *rawRead  // by the connection's reader goroutine only
}

const maxRawIO = 4 << 20

func newSockIO(c *net.TCPConn, raw bool) (sockIO, error) {
	rc, err := c.SyscallConn()
	s := sockIO{c: c, rc: rc, raw: raw, nw: new(netWrite), rw: new(rawWrite), rr: new(rawRead)}
	// The callbacks the poller calls are made once, so that a message
	// allocates nothing.
	s.rw.fn, s.rr.fn = s.rw.try, s.rr.try
	return s, err
}

// writev writes hdr then p, all of them, waiting whenever the socket's
// buffer is full.
func (s sockIO) writev(hdr, p []byte) error {
	if !s.raw {
		return s.nw.writev(s.c, hdr, p)
	}
	w := s.rw
	w.hdr, w.p, w.errno = hdr, p, 0
	raceReleaseIO()
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
	if !s.raw {
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
