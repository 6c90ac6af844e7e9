//go:build !linux

package collectives

import (
	"net"
	"syscall"
)

// congestionControl returns nil and hostCongestion "": choosing the TCP
// congestion control is supported on Linux only.
func congestionControl(string) func(string, string, syscall.RawConn) error { return nil }

func hostCongestion() string { return "" }

// sockIO reads and writes one connection through the net package; raw
// system calls (TCPConfig.RawIO) are used on Linux only (sockio_linux.go).
type sockIO struct {
	c  *net.TCPConn
	nw *netWrite
}

func newSockIO(c *net.TCPConn, _ RawIO) (sockIO, error) { return sockIO{c: c, nw: new(netWrite)}, nil }

func (s sockIO) writev(hdr, p []byte) error { return s.nw.writev(s.c, hdr, p) }

func (s sockIO) read(p []byte) (int, error) { return s.c.Read(p) }
