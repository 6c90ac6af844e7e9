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
}

const maxRawIO = 4 << 20

func newSockIO(c *net.TCPConn, raw bool) (sockIO, error) {
	rc, err := c.SyscallConn()
	return sockIO{c: c, rc: rc, raw: raw}, err
}

// writev writes hdr then p, all of them, waiting whenever the socket's
// buffer is full.
func (s sockIO) writev(hdr, p []byte) error {
	if !s.raw {
		if len(p) == 0 {
			_, err := s.c.Write(hdr)
			return err
		}
		bufs := net.Buffers{hdr, p}
		_, err := bufs.WriteTo(s.c)
		return err
	}
	var errno syscall.Errno
	raceReleaseIO()
	err := s.rc.Write(func(fd uintptr) bool {
		for len(hdr) > 0 || len(p) > 0 {
			var iov [2]syscall.Iovec
			k := 0
			if len(hdr) > 0 {
				iov[k].Base = &hdr[0]
				iov[k].SetLen(len(hdr))
				k++
			}
			if len(p) > 0 {
				iov[k].Base = &p[0]
				iov[k].SetLen(min(len(p), maxRawIO))
				k++
			}
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(k))
			switch e {
			case 0:
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait until the socket can take more
			default:
				errno = e
				return true
			}
			w := int(r)
			h := min(w, len(hdr))
			hdr, p = hdr[h:], p[w-h:]
		}
		return true
	})
	if err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
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
	p = p[:min(len(p), maxRawIO)]
	var n int
	var errno syscall.Errno
	err := s.rc.Read(func(fd uintptr) bool {
		for {
			r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
			switch e {
			case 0:
				n = int(r)
				return true
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // wait for data
			default:
				errno = e
				return true
			}
		}
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, errno
	case n == 0:
		return 0, io.EOF
	}
	raceAcquireIO()
	return n, nil
}
