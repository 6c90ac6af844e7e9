//go:build linux

package collectives

import (
	"context"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// congestion returns c's TCP congestion control algorithm, as the kernel
// reports it.
func congestion(c *net.TCPConn) (string, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return "", err
	}
	var name string
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		var buf [16]byte
		l := uint32(len(buf))
		_, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_CONGESTION,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&l)), 0)
		if e != 0 {
			gerr = e
			return
		}
		name = strings.TrimRight(string(buf[:l]), "\x00")
	}); err != nil {
		return "", err
	}
	return name, gerr
}

// TestCongestion: the sockets get reno unless told otherwise, the host's
// default with "system", and an algorithm the host lacks is an error that
// names it.
func TestCongestion(t *testing.T) {
	hostDefault, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	if err != nil {
		t.Skip("no /proc/sys/net/ipv4/tcp_congestion_control")
	}
	for _, tc := range []struct{ cfg, want string }{
		{"", DefaultCongestion},
		{"system", strings.TrimSpace(string(hostDefault))},
		{"reno", "reno"},
	} {
		a, _ := pair(t)
		tr, err := NewTCP(0, []*net.TCPConn{nil, a}, TCPConfig{Congestion: tc.cfg})
		if err != nil {
			t.Fatalf("Congestion %q: %v", tc.cfg, err)
		}
		got, err := congestion(a)
		tr.Close()
		if err != nil || got != tc.want {
			t.Errorf("Congestion %q: the socket uses %q (%v), want %q", tc.cfg, got, err, tc.want)
		}
	}
	a, _ := pair(t)
	_, err = NewTCP(0, []*net.TCPConn{nil, a}, TCPConfig{Congestion: "nosuchcc"})
	if err == nil || !strings.Contains(err.Error(), `TCP congestion control "nosuchcc"`) || !strings.Contains(err.Error(), "rank 1") ||
		!strings.Contains(err.Error(), "does not have it") {
		t.Errorf("an unknown algorithm: %v", err)
	}
}

// TestCongestionBeforeConnect: Join's listener and dialer set the
// algorithm on the sockets before they connect, and an algorithm the host
// lacks fails the dial with its name.
func TestCongestionBeforeConnect(t *testing.T) {
	if _, err := os.Stat("/proc/sys/net/ipv4/tcp_congestion_control"); err != nil {
		t.Skip("no /proc/sys/net/ipv4/tcp_congestion_control")
	}
	lc := net.ListenConfig{Control: congestionControl("")}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := net.Dialer{Control: congestionControl("reno")}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for name, conn := range map[string]net.Conn{"dialed": c, "accepted": s} {
		if got, err := congestion(conn.(*net.TCPConn)); err != nil || got != "reno" {
			t.Errorf("the %s socket uses %q (%v), want reno", name, got, err)
		}
	}
	d = net.Dialer{Control: congestionControl("nosuchcc")}
	if _, err := d.Dial("tcp", ln.Addr().String()); err == nil || !strings.Contains(err.Error(), `"nosuchcc"`) {
		t.Errorf("dialing with an unknown algorithm: %v", err)
	}
	if congestionControl("system") != nil {
		t.Error(`"system" should leave the sockets alone`)
	}
}
