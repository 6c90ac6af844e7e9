//go:build !linux

package collectives

import "net"

// sockIO reads and writes one connection through the net package; raw
// system calls (TCPConfig.RawIO) are used on Linux only (sockio_linux.go).
type sockIO struct {
	c *net.TCPConn
}

func newSockIO(c *net.TCPConn, _ bool) (sockIO, error) { return sockIO{c: c}, nil }

func (s sockIO) writev(hdr, p []byte) error {
	bufs := net.Buffers{hdr, p}
	_, err := bufs.WriteTo(s.c)
	return err
}

func (s sockIO) read(p []byte) (int, error) { return s.c.Read(p) }
