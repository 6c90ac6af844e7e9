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
	{"tcp-raw", func(t testing.TB, n int) []Transport { return tcpWorld(t, n, TCPConfig{RawIO: true}) }},
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
