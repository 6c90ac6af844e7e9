package collectives

import "net"

// netWrite writes a frame through the net package: one write for a frame
// without a separate payload, one writev otherwise. Its vectors are reused
// from frame to frame, so a send allocates nothing; the peer's write lock
// serialises its use.
type netWrite struct {
	iov  [2][]byte
	bufs net.Buffers
}

func (w *netWrite) writev(c *net.TCPConn, hdr, p []byte) error {
	if len(p) == 0 {
		_, err := c.Write(hdr)
		return err
	}
	w.iov[0], w.iov[1] = hdr, p
	w.bufs = w.iov[:]
	_, err := w.bufs.WriteTo(c)
	w.iov[0], w.iov[1] = nil, nil
	return err
}
