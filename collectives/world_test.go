package collectives

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
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

// shmWorld joins n ranks of this process through shared memory, with
// machine(r) the machine rank r stands on: ranks on different ones are
// linked through TCP.
func shmWorld(t testing.TB, n int, cfg ShmConfig, tcfg TCPConfig, machine func(r int) string) []*Mesh {
	t.Helper()
	ms, errs := joinWorld(t, n, TransportShm, cfg, tcfg, machine)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return ms
}

// joinWorld joins n ranks of this process in mode, as shmWorld does, and
// returns each rank's transport or error.
func joinWorld(t testing.TB, n int, mode TransportMode, cfg ShmConfig, tcfg TCPConfig, machine func(r int) string) ([]*Mesh, []error) {
	t.Helper()
	return joinWorldWith(t, n, mode, cfg, tcfg, machine, nil)
}

// joinWorldWith is joinWorld with each rank's JoinConfig passed through
// tweak first, when it is set.
func joinWorldWith(t testing.TB, n int, mode TransportMode, cfg ShmConfig, tcfg TCPConfig, machine func(r int) string, tweak func(r int, jc *JoinConfig)) ([]*Mesh, []error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ms := make([]*Mesh, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jc := JoinConfig{Rank: r, Size: n, Coord: ln.Addr().String(), Secret: "shm", Timeout: 20 * time.Second,
				TCP: tcfg, Transport: mode, Shm: cfg, machine: machine(r)}
			if r == 0 {
				jc.CoordListener = ln
			}
			if tweak != nil {
				tweak(r, &jc)
			}
			ms[r], _, errs[r] = Join(context.Background(), jc)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, m := range ms {
			if m != nil {
				m.Close()
			}
		}
	})
	return ms, errs
}

func meshes(ms []*Mesh) []Transport {
	ts := make([]Transport, len(ms))
	for r, m := range ms {
		ts[r] = m
	}
	return ts
}

func oneMachine(int) string { return "m" }

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
	// Shared memory with its defaults: small messages through the rings,
	// large ones copied once from the sender's memory.
	{"shm", func(t testing.TB, n int) []Transport {
		return meshes(shmWorld(t, n, ShmConfig{}, TCPConfig{}, oneMachine))
	}},
	// Every message through rings of 4 KiB, polling before sleeping:
	// messages larger than the ring stream through it in parts.
	{"shm-ring", func(t testing.TB, n int) []Transport {
		return meshes(shmWorld(t, n, ShmConfig{RingBytes: 4 << 10, CopyOnceMin: -1, Spin: 20 * time.Microsecond}, TCPConfig{}, oneMachine))
	}},
	// Every message but the empty ones copied once, straight from the
	// sender's memory: with the defaults only messages of 512 KiB or more
	// are, which the collectives' tests do not reach.
	{"shm-copyonce", func(t testing.TB, n int) []Transport {
		ms := shmWorld(t, n, ShmConfig{CopyOnceMin: 1}, TCPConfig{}, oneMachine)
		if n == 1 {
			return meshes(ms)
		}
		if can, _ := copiedOnce(ms); !can {
			t.Skip("this kernel does not let a rank read its peer's memory: messages go through the rings")
		}
		t.Cleanup(func() { // before the transports close
			if _, pulled := copiedOnce(ms); pulled == 0 && !t.Failed() {
				t.Error("no message was copied once")
			}
		})
		return meshes(ms)
	}},
	// Two machines, shared memory within each and TCP between them.
	{"mixed", func(t testing.TB, n int) []Transport {
		return meshes(shmWorld(t, n, ShmConfig{}, TCPConfig{}, func(r int) string { return fmt.Sprint("m", r%2) }))
	}},
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
