package collectives

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// joinTimeout is the join limit of the tests with strangers: a job of a
// few ranks on one host joins in milliseconds, so a stranger that delayed
// it by a second would fail it.
const joinTimeout = time.Second

// joinAll joins n ranks through a coordinator listening on ln, each with
// timeout; mesh0, if not nil, is rank 0's listener for its peers.
func joinAll(t *testing.T, n int, secret string, timeout time.Duration, ln, mesh0 net.Listener) ([]*Mesh, []error) {
	t.Helper()
	ts := make([]*Mesh, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jc := JoinConfig{Rank: r, Size: n, Coord: ln.Addr().String(), Secret: secret, Timeout: timeout}
			if r == 0 {
				jc.CoordListener, jc.meshListener = ln, mesh0
			}
			ts[r], _, errs[r] = Join(context.Background(), jc)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, tr := range ts {
			if tr != nil {
				tr.Close()
			}
		}
	})
	return ts, errs
}

// idle opens n connections to addr that never say anything.
func idle(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	var cs []net.Conn
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	return cs
}

// cutOff checks that every stranger's connection has been closed.
func cutOff(t *testing.T, strangers []net.Conn) {
	t.Helper()
	for i, c := range strangers {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Errorf("stranger %d was not cut off when the job was in: %v", i, err)
		}
	}
}

// TestIdleStrangersDelayNoOne: connections to the coordinator that never
// say anything used to hold its one accept loop for 10 s each; now they
// are greeted side by side. With four of them open, a 4-rank job joins
// within a join limit of a second, and the strangers are cut off once
// the job is in.
func TestIdleStrangersDelayNoOne(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	strangers := idle(t, ln.Addr().String(), 4)
	if _, errs := joinAll(t, 4, "s3cret", joinTimeout, ln, nil); errors.Join(errs...) != nil {
		t.Fatalf("joining beside idle strangers: %v", errors.Join(errs...))
	}
	cutOff(t, strangers)
}

// TestManyIdleConnectionsFailNoJob: far more idle connections than the
// coordinator keeps in their handshake (each holds a file descriptor)
// make the oldest give way; the job joins within its limit.
func TestManyIdleConnectionsFailNoJob(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	strangers := idle(t, ln.Addr().String(), 4+strangerSlots*4)
	if _, errs := joinAll(t, 4, "s3cret", joinTimeout, ln, nil); errors.Join(errs...) != nil {
		t.Fatalf("joining beside %d idle connections: %v", len(strangers), errors.Join(errs...))
	}
	cutOff(t, strangers)
}

// TestStrangersAtAMeshListener: two idle connections to rank 0's listener
// for its peers, and one claiming to be rank 2 without the secret, used to
// fail the job blaming rank 0; they are cut off, and the job joins.
func TestStrangersAtAMeshListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	strangers := idle(t, mesh.Addr().String(), 2)
	impostor, err := net.Dial("tcp", mesh.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer impostor.Close()
	answered := make(chan []byte, 1)
	go func() {
		nonce := make([]byte, nonceLen)
		if _, err := io.ReadFull(impostor, nonce); err != nil {
			answered <- nil
			return
		}
		var g [greetingLen]byte
		copy(g[:], meshMagic)
		binary.LittleEndian.PutUint32(g[8:], 2)
		binary.LittleEndian.PutUint32(g[12:], 4)
		copy(g[16:], mac(sha256.Sum256([]byte("a guess")), nonce, 2, 4))
		_, _ = impostor.Write(g[:])
		b, _ := io.ReadAll(impostor)
		answered <- b
	}()
	if _, errs := joinAll(t, 4, "s3cret", joinTimeout, ln, mesh); errors.Join(errs...) != nil {
		t.Fatalf("joining beside strangers at rank 0's mesh listener: %v", errors.Join(errs...))
	}
	// Refused (0), or cut off unanswered when the job was in first; never
	// accepted (1).
	if b := <-answered; len(b) > 1 || len(b) == 1 && b[0] != 0 {
		t.Errorf("the impostor was answered %v", b)
	}
	cutOff(t, strangers)
}

// failingListener fails its first accepts as a process out of file
// descriptors does.
type failingListener struct {
	net.Listener
	fails atomic.Int32
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestAcceptOutOfDescriptors: an accept that fails with EMFILE (too many
// open files) used to end the coordinator's accepting and fail the job;
// it is tried again.
func TestAcceptOutOfDescriptors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fl := &failingListener{Listener: ln}
	fl.fails.Store(5)
	if _, errs := joinAll(t, 3, "s3cret", 10*time.Second, fl, nil); errors.Join(errs...) != nil {
		t.Fatalf("joining through accepts that fail with EMFILE: %v", errors.Join(errs...))
	}
	if n := fl.fails.Load(); n >= 0 {
		t.Fatalf("%d failing accepts were never made", n+1)
	}
}

// TestListenersBindTheJobsInterface: a job whose coordinator is on
// loopback listens on loopback only; one whose coordinator is one of this
// host's addresses listens on that address, not on every interface.
func TestListenersBindTheJobsInterface(t *testing.T) {
	if got := meshHost(JoinConfig{Coord: "127.0.0.1:7000"}); got != "127.0.0.1" {
		t.Errorf("mesh listener of a loopback job: %q", got)
	}
	if got := localBind("127.0.0.1"); got != "127.0.0.1" {
		t.Errorf("coordinator of a loopback job: %q", got)
	}
	if got := localBind("192.0.2.1"); got != "" { // not this host's (TEST-NET-1)
		t.Errorf("coordinator for an address elsewhere (behind a NAT): %q, want every interface", got)
	}
	ip := advertiseHost()
	if ip == "127.0.0.1" {
		t.Skip("this host has no address but loopback")
	}
	if got := meshHost(JoinConfig{Coord: net.JoinHostPort(ip, "7000")}); got != ip {
		t.Errorf("mesh listener of a job whose coordinator is %s: %q", ip, got)
	}
	// A 2-rank job with its coordinator on loopback: while rank 0 waits
	// for rank 1, its coordinator port answers on loopback and not on
	// the host's other address.
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(free.Addr().(*net.TCPAddr).Port)
	free.Close()
	coord := net.JoinHostPort("127.0.0.1", port)
	done := make(chan error, 1)
	go func() {
		tr, _, err := Join(context.Background(), JoinConfig{Rank: 0, Size: 2, Coord: coord, Secret: "s3cret", Timeout: 10 * time.Second})
		if tr != nil {
			tr.Close()
		}
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", coord)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rank 0's coordinator never listened on %s: %v", coord, err)
		}
		time.Sleep(10 * time.Millisecond) // polling for rank 0's listener
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, port), time.Second); err == nil {
		c.Close()
		t.Errorf("a loopback job's coordinator answers on %s", ip)
	}
	tr, _, err := Join(context.Background(), JoinConfig{Rank: 1, Size: 2, Coord: coord, Secret: "s3cret", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tr.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestStrangerPretendingToBeARank: a process that knows the coordinator's
// port but not the secret, claiming rank 3 before the real one, is
// refused; the real rank 3 joins.
func TestStrangerPretendingToBeARank(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	refused := make(chan string, 1)
	go func() {
		br := bufio.NewReader(c)
		nonce := make([]byte, nonceLen)
		if _, err := io.ReadFull(br, nonce); err != nil {
			refused <- "no nonce: " + err.Error()
			return
		}
		// A hello as a rank's, with a MAC made without the secret.
		_ = json.NewEncoder(c).Encode(hello{Rank: 3, Size: 4, Addr: "127.0.0.1:1", MAC: strings.Repeat("ab", 32)})
		var r roster
		if err := json.NewDecoder(br).Decode(&r); err != nil {
			refused <- "no answer: " + err.Error()
			return
		}
		if len(r.Peers) > 0 {
			refused <- fmt.Sprintf("given the roster: %+v", r.Peers)
			return
		}
		refused <- r.Error
	}()
	// The coordinator greets connections once rank 0 joins. The other
	// ranks join once the stranger has had its answer: a job that had
	// joined would cut it off unanswered, which says nothing of the check.
	const n = 4
	ts := make([]*Mesh, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	join := func(r int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jc := JoinConfig{Rank: r, Size: n, Coord: ln.Addr().String(), Secret: "s3cret", Timeout: 10 * time.Second}
			if r == 0 {
				jc.CoordListener = ln
			}
			ts[r], _, errs[r] = Join(context.Background(), jc)
		}()
	}
	join(0)
	var msg string
	select {
	case msg = <-refused:
	case <-time.After(10 * time.Second):
		t.Fatal("the stranger had no answer in 10s")
	}
	for r := 1; r < n; r++ {
		join(r)
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, tr := range ts {
			if tr != nil {
				tr.Close()
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("the job beside a stranger claiming rank 3: %v", err)
	}
	if !strings.Contains(msg, "wrong job secret") {
		t.Fatalf("the stranger was answered %q", msg)
	}
}

// TestOversizedHelloIsRefused: a stranger sending 64 MiB as its hello is
// cut off after the first 64 KiB, and the coordinator's memory does not
// grow with what it was sent; the job joins.
func TestOversizedHelloIsRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sent := make(chan int64, 1)
	go func() {
		// An unterminated JSON string: a reader without a bound would keep
		// all of it.
		chunk := []byte(`{"rank":1,"host":"` + strings.Repeat("x", 1<<20))
		var n int64
		for n < 64<<20 {
			k, err := c.Write(chunk)
			n += int64(k)
			if err != nil {
				break
			}
			chunk = chunk[:0]
			chunk = append(chunk, strings.Repeat("x", 1<<20)...)
		}
		sent <- n
	}()
	_, errs := joinAll(t, 2, "s3cret", 10*time.Second, ln, nil)
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("the job beside an oversized hello: %v", err)
	}
	n := <-sent
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("the stranger got %d bytes in before it was cut off; the heap grew %d bytes", n, grew)
	if n >= 64<<20 {
		t.Errorf("the coordinator took all %d bytes", n)
	}
	if grew > 16<<20 {
		t.Errorf("the heap grew %d bytes while a stranger sent its hello", grew)
	}
}

// The acceptor keeps at most its slots of connections in their
// handshake: each one more makes the oldest give way at once; the newest
// are kept until the acceptor is closed.
func TestAcceptorMakesTheOldestGiveWay(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	acc := newAcceptor(ln, 2)
	ran := make(chan error, 1)
	go func() {
		ran <- acc.run(func(c net.Conn) {
			_, _ = io.Copy(io.Discard, c) // a handshake that never ends
			acc.handshaken(c)
		})
	}()
	conns := idle(t, ln.Addr().String(), 5)
	for i, c := range conns[:3] {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Errorf("connection %d of 5 with 2 slots was not cut off: %v", i, err)
		}
	}
	for i, c := range conns[3:] {
		_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("connection %d, one of the 2 newest, was cut off: %v", 3+i, err)
		}
	}
	acc.close()
	if err := <-ran; !errors.Is(err, net.ErrClosed) {
		t.Errorf("run ended with %v", err)
	}
	cutOff(t, conns[3:])
}

// TestDefaultJoinTimeoutGrowsWithThePairs: the join's default time is the
// one docs/launching.md gives for each size.
func TestDefaultJoinTimeoutGrowsWithThePairs(t *testing.T) {
	for _, tc := range []struct {
		size int
		want time.Duration
	}{{1, 60 * time.Second}, {4, 60 * time.Second}, {64, 64 * time.Second}, {256, 124 * time.Second}, {512, 316 * time.Second},
		{1500, 10 * time.Minute}, {4096, 10 * time.Minute}} {
		if got := defaultJoinTimeout(tc.size).Round(time.Second); got != tc.want {
			t.Errorf("%d ranks: %v, want %v", tc.size, got, tc.want)
		}
	}
}
