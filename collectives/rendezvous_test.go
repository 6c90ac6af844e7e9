package collectives

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// joinAll joins n ranks through a coordinator listening on ln, each with
// timeout, after strangers has been given ln's address.
func joinAll(t *testing.T, n int, secret string, timeout time.Duration, ln net.Listener) ([]*Mesh, []error) {
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
				jc.CoordListener = ln
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

// TestIdleStrangersDelayNoOne: connections to the coordinator that never
// say anything used to hold its one accept loop for 10 s each; now they
// are greeted side by side. With four of them open, a 4-rank job joins
// well within a 3 s join timeout (the old coordinator would need 40 s),
// and the strangers are cut off once the job is in.
func TestIdleStrangersDelayNoOne(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var strangers []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		strangers = append(strangers, c)
	}
	t0 := time.Now()
	_, errs := joinAll(t, 4, "s3cret", 3*time.Second, ln)
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("joining beside idle strangers: %v", err)
	}
	t.Logf("4 ranks joined beside 4 idle strangers in %v", time.Since(t0))
	for i, c := range strangers {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Errorf("stranger %d was not cut off when the job was in: %v", i, err)
		}
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
		_ = json.NewDecoder(br).Decode(&r)
		refused <- r.Error
	}()
	// The coordinator greets connections once rank 0 joins; the stranger's
	// claim is checked while the ranks join.
	_, errs := joinAll(t, 4, "s3cret", 10*time.Second, ln)
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("the job beside a stranger claiming rank 3: %v", err)
	}
	if msg := <-refused; !strings.Contains(msg, "wrong job secret") {
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
	_, errs := joinAll(t, 2, "s3cret", 10*time.Second, ln)
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
