package collectives

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// tcpWorld joins n ranks over loopback TCP inside this process.
func tcpWorld(t testing.TB, n int, tcfg TCPConfig) []Transport {
	t.Helper()
	tcps, _, err := NewLoopback(context.Background(), n, tcfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := make([]Transport, n)
	for r, tr := range tcps {
		ts[r] = tr
	}
	t.Cleanup(func() {
		for _, tr := range ts {
			tr.Close()
		}
	})
	return ts
}

type world struct {
	name string
	make func(t testing.TB, n int) []Transport
}

var worlds = []world{
	{"local", func(t testing.TB, n int) []Transport {
		ts := NewLocal(n)
		t.Cleanup(func() {
			for _, tr := range ts {
				tr.Close()
			}
		})
		return ts
	}},
	{"tcp", func(t testing.TB, n int) []Transport { return tcpWorld(t, n, TCPConfig{}) }},
	{"tcp-raw", func(t testing.TB, n int) []Transport { return tcpWorld(t, n, TCPConfig{RawIO: RawOn}) }},
	{"tcp-rawlarge", func(t testing.TB, n int) []Transport { return tcpWorld(t, n, TCPConfig{RawIO: RawLarge}) }},
}

// run calls f on every rank concurrently and returns the ranks' errors.
func run(t testing.TB, ts []Transport, cfg Config, f func(c *Comm) error) []error {
	t.Helper()
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for r, tr := range ts {
		c, err := New(tr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					errs[r] = fmt.Errorf("panic: %v", p)
				}
			}()
			errs[r] = f(c)
		}()
	}
	wg.Wait()
	return errs
}

func mustRun(t testing.TB, ts []Transport, cfg Config, f func(c *Comm) error) {
	t.Helper()
	for r, err := range run(t, ts, cfg, f) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// TestSendRecvAllocs checks that a message in steady state allocates
// nothing, on either I/O path, small frames and large.
func TestSendRecvAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, raw := range []RawIO{RawOff, RawLarge, RawOn} {
		for _, size := range []int{64, 256 << 10} {
			t.Run(fmt.Sprintf("raw=%v/%dB", raw, size), func(t *testing.T) {
				ts := tcpWorld(t, 2, TCPConfig{RawIO: raw})
				ctx := context.Background()
				out, in := make([]byte, size), make([]byte, size)
				h := Header{Comm: 1, Op: OpSendRecv, Algo: AlgoDirect, DType: Float32}
				var seq uint64
				round := func() {
					seq++
					h.Seq = seq
					r := ts[1].Post(0, h, in)
					if err := ts[0].Send(ctx, 1, h, out); err != nil {
						t.Fatal(err)
					}
					if _, err := r.Wait(ctx); err != nil {
						t.Fatal(err)
					}
				}
				for range 50 {
					round()
				}
				if n := testing.AllocsPerRun(500, round); n > 0 {
					t.Errorf("%v allocations per message", n)
				}
			})
		}
	}
}
