//go:build linux

package collectives

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// shmConfigs are the ways a message can travel through shared memory:
// in the ring (small, or large where the receiver cannot read the
// sender's memory), streamed in parts through a ring smaller than it,
// or copied once from the sender's memory.
var shmConfigs = []struct {
	name string
	cfg  ShmConfig
}{
	{"default", ShmConfig{}},
	{"ring-4K", ShmConfig{RingBytes: 4 << 10, CopyOnceMin: -1}},
	{"copy-once-always", ShmConfig{CopyOnceMin: 1}},
	{"no-spin", ShmConfig{Spin: -1}},
}

// copiedOnce reports whether rank 0 of ms announces its large messages to
// rank 1 for it to copy once (the kernel lets it read rank 0's memory),
// and how many messages the ranks of ms have copied once so far.
func copiedOnce(ms []*Mesh) (can bool, pulled uint64) {
	for _, m := range ms {
		for _, l := range m.shm.active {
			pulled += l.in.acks.Load()
		}
	}
	return ms[0].shm.links[1].push, pulled
}

// TestShmSingleCopyFollowsTheMachine: left to the machine, single copy is
// used only where the kernel copies between processes at least as fast as
// memcpy, from 1 MiB (512 KiB when ranks outnumber cores); a threshold set
// in ShmConfig is used as set, without measuring.
func TestShmSingleCopyFollowsTheMachine(t *testing.T) {
	cores := runtime.NumCPU()
	for _, tc := range []struct {
		name  string
		cfg   ShmConfig
		rates copyRates
		local int
		want  int
	}{
		{"kernel slower", ShmConfig{}, copyRates{kernel: 9, memcpy: 25}, 1, 0},
		{"kernel slower, crowded", ShmConfig{}, copyRates{kernel: 13, memcpy: 25}, cores + 1, 0},
		{"kernel as fast", ShmConfig{}, copyRates{kernel: 25, memcpy: 25}, 1, 1 << 20},
		{"kernel faster, crowded", ShmConfig{}, copyRates{kernel: 30, memcpy: 25}, cores + 1, 512 << 10},
		{"kernel copy refused", ShmConfig{}, copyRates{err: unix.EPERM}, 1, 0},
		{"set", ShmConfig{CopyOnceMin: 4096}, copyRates{kernel: 1, memcpy: 25}, 1, 4096},
		{"never", ShmConfig{CopyOnceMin: -1}, copyRates{kernel: 99, memcpy: 25}, 1, 0},
	} {
		measured := false
		r := resolveShm(tc.cfg, TCPConfig{}, tc.local, func() copyRates { measured = true; return tc.rates })
		if r.copyOnceMin != tc.want {
			t.Errorf("%s: single copy from %d bytes, want %d", tc.name, r.copyOnceMin, tc.want)
		}
		if set := tc.cfg.CopyOnceMin != 0; measured == set || (r.rates != nil) == set {
			t.Errorf("%s: measured %v, with rates %v, though the threshold was set: %v", tc.name, measured, r.rates, set)
		}
	}
	// The measurement itself gives two rates.
	c := measureCopies()
	if c.err != nil {
		t.Skipf("this process cannot use process_vm_readv: %v", c.err)
	}
	if c.kernel <= 0 || c.memcpy <= 0 || !strings.Contains(c.String(), "GB/s") {
		t.Errorf("measured %+v (%s)", c, c)
	}
}

// TestDefaultRingFitsTheMachine: the default ring keeps every pair's two
// rings within the budget, halving down to the smallest ring the set-up
// accepts, and stays a power of two.
func TestDefaultRingFitsTheMachine(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		local  int
		budget int64
		want   int
	}{
		{1, gib, 1 << 20}, {4, gib, 1 << 20}, {16, gib, 1 << 20}, {17, gib, 256 << 10}, {64, gib, 256 << 10},
		{128, gib, 64 << 10}, {256, gib, 16 << 10}, {512, gib, 4 << 10}, {4096, gib, 4 << 10},
		{16, 32 << 20, 128 << 10}, {4, 0, shmMinRing},
	} {
		if got := defaultRing(tc.local, tc.budget); got != tc.want {
			t.Errorf("%d ranks, budget %d: ring %d, want %d", tc.local, tc.budget, got, tc.want)
		}
	}
	for local := 1; local <= 1024; local++ {
		ring := defaultRing(local, gib)
		pairs := int64(local) * int64(local-1) / 2
		if ring&(ring-1) != 0 || ring < shmMinRing || ring > shmMaxRing || (ring > shmMinRing && pairs*2*int64(ring) > gib) {
			t.Fatalf("%d ranks: ring %d (%d pairs take %d bytes)", local, ring, pairs, pairs*2*int64(ring))
		}
	}
	if b := shmRingBudget(); b <= 0 || b > gib {
		t.Errorf("this machine's budget is %d bytes", b)
	}
}

// TestShmLinksFollowMachines: ranks on one machine link through shared
// memory, the others through TCP; with COMMPROF_TRANSPORT=tcp every pair
// is TCP.
func TestShmLinksFollowMachines(t *testing.T) {
	machines := []string{"a", "a", "b", "a", "b"}
	ms := shmWorld(t, 5, ShmConfig{}, TCPConfig{}, func(r int) string { return machines[r] })
	for r, m := range ms {
		for p := range ms {
			want := "tcp"
			switch {
			case p == r:
				want = "self"
			case machines[p] == machines[r]:
				want = "shm"
			}
			if got := m.Link(p); got != want {
				t.Errorf("rank %d reaches rank %d through %s, want %s", r, p, got, want)
			}
		}
	}
	if d := ms[0].Describe(); !strings.Contains(d, "2 peers through shared memory") || !strings.Contains(d, "2 peers through TCP") {
		t.Errorf("rank 0 describes its links as %q", d)
	}
	for r, m := range ms {
		if err := m.ShmFallback(); err != nil {
			t.Errorf("rank %d, which shares memory with every rank on its machine, says %v", r, err)
		}
	}
	tcps, _, err := NewLoopback(context.Background(), 2, TCPConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range tcps {
		tr.Close()
	}
}

// TestShmSetupFailure: when the set-up of shared memory between two ranks
// of a machine fails (here the higher rank refuses a segment whose ring
// is not a power of two), the job fails at the join with the reason
// under TransportShm; under TransportAuto it runs over TCP, and every rank
// says why (ShmFallback, and Describe for benchmark headers).
func TestShmSetupFailure(t *testing.T) {
	bad := ShmConfig{RingBytes: 3000}
	_, errs := joinWorld(t, 2, TransportShm, bad, TCPConfig{}, oneMachine)
	if err := errs[0]; err == nil || !strings.Contains(err.Error(), "rank 1 did not take the segment") {
		t.Errorf("shm: rank 0 joined with %v, want rank 1's refusal", err)
	}
	if err := errs[1]; err == nil || !strings.Contains(err.Error(), "a ring of 3000 bytes") {
		t.Errorf("shm: rank 1 joined with %v, want the reason it refused the segment", err)
	}
	ms, errs := joinWorld(t, 2, TransportAuto, bad, TCPConfig{}, oneMachine)
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("auto: %v", err)
	}
	for r, m := range ms {
		if l := m.Link(1 - r); l != "tcp" {
			t.Errorf("auto: rank %d reaches its peer through %s, want tcp", r, l)
		}
		err, d := m.ShmFallback(), m.Describe()
		if err == nil || !strings.Contains(err.Error(), "setting up shared memory with rank") || !strings.Contains(d, "1 peer through TCP") || !strings.Contains(d, "not through shared memory: setting up") {
			t.Errorf("auto: rank %d says %v, and describes its links as %q", r, err, d)
		}
	}
	if err := ms[1].ShmFallback(); err == nil || !strings.Contains(err.Error(), "a ring of 3000 bytes") {
		t.Errorf("auto: the rank that refused the segment says %v, want the reason", err)
	}
	mustRun(t, meshes(ms), Config{}, func(c *Comm) error {
		b := NewBuffer(Float32, 1000)
		fill(b, func(i int) float64 { return val(c.Rank(), i) })
		if err := c.AllReduce(context.Background(), b, Sum); err != nil {
			return err
		}
		return expect(b, "allreduce over the fallback", func(i int) float64 { return reference(Sum, 2, i) })
	})
}

// TestShmTransportTCPMode: a rank that asks for TCP keeps TCP with every
// peer, even on its machine, and the others agree.
func TestShmTransportTCPMode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ms := make([]*Mesh, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jc := JoinConfig{Rank: r, Size: 3, Coord: ln.Addr().String(), Secret: "s", Timeout: 20 * time.Second, machine: "m"}
			if r == 0 {
				jc.CoordListener, jc.Transport = ln, TransportTCP
			}
			ms[r], _, errs[r] = Join(context.Background(), jc)
		}()
	}
	wg.Wait()
	for _, m := range ms {
		if m != nil {
			defer m.Close()
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for r, want := range [][]string{{"self", "tcp", "tcp"}, {"tcp", "self", "shm"}, {"tcp", "shm", "self"}} {
		for p, w := range want {
			if got := ms[r].Link(p); got != w {
				t.Errorf("rank %d reaches rank %d through %s, want %s", r, p, got, w)
			}
		}
	}
}

// TestShmMessages sends messages of many sizes both ways, before and
// after their receives are posted, over every way of travelling, and
// checks every byte, the order of messages with the same header, and
// what RecvInfo says about when each arrived.
func TestShmMessages(t *testing.T) {
	for _, sc := range shmConfigs {
		t.Run(sc.name, func(t *testing.T) {
			ms := shmWorld(t, 2, sc.cfg, TCPConfig{}, oneMachine)
			ctx := context.Background()
			for _, size := range []int{0, 1, 100, 4 << 10, 5000, 64 << 10, 1 << 20, 3<<20 + 7} {
				for _, early := range []bool{false, true} {
					h := Header{Comm: 3, Seq: uint64(size), Op: OpSendRecv, Algo: AlgoDirect, DType: Float32}
					out := [2][]byte{pattern(size, 1), pattern(size, 2)}
					in := [2][]byte{make([]byte, size), make([]byte, size)}
					var posted time.Time
					var rs [2]Receive
					post := func() {
						posted = time.Now()
						rs[0] = ms[1].Post(0, h, in[0])
						rs[1] = ms[1].Post(0, h, in[1])
					}
					if !early {
						post()
					}
					// Two messages with one header: they must match in order.
					errc := make(chan error, 1)
					go func() {
						for _, p := range out {
							if err := ms[0].Send(ctx, 1, h, p); err != nil {
								errc <- err
								return
							}
						}
						errc <- nil
					}()
					if early {
						if err := <-errc; err != nil {
							t.Fatal(err)
						}
						post()
					}
					for i, r := range rs {
						info, err := r.Wait(ctx)
						if err != nil {
							t.Fatalf("%d bytes, message %d: %v", size, i, err)
						}
						if !bytes.Equal(in[i], out[i]) {
							t.Fatalf("%d bytes, message %d: the payload differs", size, i)
						}
						if info.Arrived.IsZero() || info.Done.Before(info.Arrived) {
							t.Errorf("%d bytes: arrived %v, done %v", size, info.Arrived, info.Done)
						}
						if early && !info.Arrived.Before(posted) {
							t.Errorf("%d bytes sent before the receive was posted arrived %v after it", size, info.Arrived.Sub(posted))
						}
						if !early && i == 0 && info.Arrived.Before(posted) {
							t.Errorf("%d bytes sent after the receive was posted arrived %v before it", size, posted.Sub(info.Arrived))
						}
					}
					if !early {
						if err := <-errc; err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		})
	}
}

func pattern(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*seed + i>>8)
	}
	return b
}

// TestShmMismatchAndLimits: a message of another length than posted is a
// MismatchError, whichever way it travels, and the link goes on; a
// message larger than MaxUnexpected sent before its receive fails the
// sender.
func TestShmMismatchAndLimits(t *testing.T) {
	for _, sc := range shmConfigs[:3] {
		t.Run(sc.name, func(t *testing.T) {
			ms := shmWorld(t, 2, sc.cfg, TCPConfig{MaxUnexpected: 1 << 20}, oneMachine)
			ctx := context.Background()
			for _, size := range []int{10, 100 << 10} {
				h := Header{Comm: 1, Seq: uint64(size), Op: OpSendRecv, Algo: AlgoDirect, DType: Float32}
				r := ms[1].Post(0, h, make([]byte, size+4))
				if err := ms[0].Send(ctx, 1, h, make([]byte, size)); err != nil {
					t.Fatal(err)
				}
				var me *MismatchError
				if _, err := r.Wait(ctx); !errors.As(err, &me) || me.Len != size {
					t.Fatalf("%d bytes into %d: %v", size, size+4, err)
				}
				h.Seq++
				in := make([]byte, size)
				r = ms[1].Post(0, h, in)
				if err := ms[0].Send(ctx, 1, h, pattern(size, 3)); err != nil {
					t.Fatal(err)
				}
				if _, err := r.Wait(ctx); err != nil || !bytes.Equal(in, pattern(size, 3)) {
					t.Fatalf("the message after a mismatch: %v", err)
				}
			}
			h := Header{Comm: 1, Seq: 99, Op: OpSendRecv, Algo: AlgoDirect, DType: Float32}
			err := ms[0].Send(ctx, 1, h, make([]byte, 2<<20))
			if err == nil {
				_, err = ms[0].Post(1, h, make([]byte, 1)).Wait(ctx)
			}
			var pe *PeerError
			if !errors.As(err, &pe) || pe.Rank != 1 && pe.Rank != 0 {
				t.Fatalf("a 2 MiB message nobody posted for, beyond MaxUnexpected: %v", err)
			}
		})
	}
}

// TestShmSendRecvAllocs: a message in steady state allocates nothing,
// small or large, through the ring or copied once.
func TestShmSendRecvAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, sc := range shmConfigs[:3] {
		for _, size := range []int{64, 256 << 10} {
			t.Run(fmt.Sprintf("%s/%dB", sc.name, size), func(t *testing.T) {
				ms := shmWorld(t, 2, sc.cfg, TCPConfig{}, oneMachine)
				ctx := context.Background()
				out, in := make([]byte, size), make([]byte, size)
				h := Header{Comm: 1, Op: OpSendRecv, Algo: AlgoDirect, DType: Float32}
				var seq uint64
				round := func() {
					seq++
					h.Seq = seq
					r := ms[1].Post(0, h, in)
					if err := ms[0].Send(ctx, 1, h, out); err != nil {
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

// die makes rank r of ms vanish as a killed process would: no goodbye,
// its control sockets and TCP connections closed by the kernel, its
// progress goroutine gone.
func die(ms []*Mesh, r int) {
	m := ms[r]
	if s := m.shm; s != nil {
		s.closed.Store(true)
		s.stopping.Store(true)
		ringBell(s.bellFD)
		s.wakeProgress()
		for _, l := range s.active {
			_ = l.ctrl.Close()
		}
		s.wg.Wait()
	}
	m.tcp.closed.Store(true)
	for _, p := range m.tcp.peers {
		if p != nil {
			p.conn.Close()
		}
	}
}

// stall stops rank r of ms as SIGSTOP would its process, as far as
// shared memory sees: its progress goroutine, which keeps its heartbeats,
// stops; its control sockets stay open.
func stall(ms []*Mesh, r int) {
	s := ms[r].shm
	s.stopping.Store(true)
	ringBell(s.bellFD)
	s.wakeProgress()
}

// TestShmStalledPeerTimesOut: a rank that stops beating its heart is
// given up after the peer timeout, by name, on every other rank.
func TestShmStalledPeerTimesOut(t *testing.T) {
	ms := shmWorld(t, 3, ShmConfig{}, TCPConfig{Heartbeat: 100 * time.Millisecond, PeerTimeout: time.Second}, oneMachine)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := run(t, meshes(ms), Config{}, func(c *Comm) error {
		if c.Rank() == 1 {
			stall(ms, 1)
			return nil
		}
		return c.AllReduce(ctx, NewBuffer(Float32, 10), Sum)
	})
	if ctx.Err() != nil {
		t.Fatal("ranks hung on a stalled rank")
	}
	for _, r := range []int{0, 2} {
		var pe *PeerError
		if !errors.As(errs[r], &pe) || pe.Rank != 1 || !strings.Contains(errs[r].Error(), "no data or heartbeat for 1s") {
			t.Errorf("rank %d: got %v, want a PeerError for rank 1's silence", r, errs[r])
		}
	}
}

// TestPeerStillJoiningIsNotTakenForDead: a rank whose links are made but
// which finishes joining several peer timeouts after the others (on one
// machine of hundreds of ranks it is still making its links to the rest)
// is waited for, over TCP and over shared memory: until a peer has
// joined it is allowed the join's time.
func TestPeerStillJoiningIsNotTakenForDead(t *testing.T) {
	for _, mode := range []TransportMode{TransportTCP, TransportShm} {
		t.Run(mode.String(), func(t *testing.T) {
			ms, errs := joinWorldWith(t, 3, mode, ShmConfig{}, TCPConfig{Heartbeat: 20 * time.Millisecond, PeerTimeout: 200 * time.Millisecond}, oneMachine,
				func(r int, jc *JoinConfig) {
					if r == 2 {
						jc.linked = func() { time.Sleep(time.Second) } // five peer timeouts
					}
				})
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			mustRun(t, meshes(ms), Config{}, func(c *Comm) error {
				return c.AllReduce(ctx, NewBuffer(Float32, 10), Sum)
			})
		})
	}
}

// TestShmBusyRankIsNotTakenForDead: a rank whose waits polled for their
// own messages (its progress goroutine then stands aside), and which then
// works away from the transport for several peer timeouts, is not given
// up by a peer that waits for it: its heartbeats go on.
func TestShmBusyRankIsNotTakenForDead(t *testing.T) {
	ms := shmWorld(t, 2, ShmConfig{}, TCPConfig{Heartbeat: 20 * time.Millisecond, PeerTimeout: 200 * time.Millisecond}, oneMachine)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mustRun(t, meshes(ms), Config{}, func(c *Comm) error {
		buf := NewBuffer(Float32, 2)
		for range 200 {
			if err := c.AllReduce(ctx, buf, Sum); err != nil {
				return err
			}
		}
		if c.Rank() == 0 {
			time.Sleep(time.Second) // computing: five peer timeouts
		}
		return c.AllReduce(ctx, buf, Sum)
	})
}

// TestShmBlockedWaitIsServed: a goroutine blocked on shared memory (a
// send waiting for ring space, a receive) is served by its rank's progress
// goroutine even when the goroutines that polled beside it stop polling
// and wait elsewhere, as the ring allreduce's caller waits for its sender
// goroutine. The heartbeats are an hour apart, so that only the progress
// goroutine's polling, not its heartbeat, can release such a wait.
func TestShmBlockedWaitIsServed(t *testing.T) {
	ms := shmWorld(t, 2, ShmConfig{RingBytes: 64 << 10, CopyOnceMin: -1}, TCPConfig{Heartbeat: time.Hour}, oneMachine)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cfg := Config{Algorithms: map[Op]Algo{OpAllReduce: AlgoRing}, Tuning: DefaultTuning()}
	cfg.Tuning.SegmentBytes = 256 << 10
	mustRun(t, meshes(ms), cfg, func(c *Comm) error {
		buf := NewBuffer(Float32, 1<<20)
		for range 40 {
			if err := c.AllReduce(ctx, buf, Sum); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestShmDeadPeerFailsEveryRank kills rank 2 of 4 in the middle of a
// stream of collectives, in a world on one machine and in one across two
// (where some ranks learn of it through TCP): every other rank must fail
// with a PeerError naming rank 2, and none may hang.
func TestShmDeadPeerFailsEveryRank(t *testing.T) {
	for _, tc := range []struct {
		name    string
		machine func(int) string
	}{
		{"one-machine", oneMachine},
		{"two-machines", func(r int) string { return fmt.Sprint(r / 2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := shmWorld(t, 4, ShmConfig{}, TCPConfig{}, tc.machine)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			errs := run(t, meshes(ms), Config{}, func(c *Comm) error {
				b := NewBuffer(Float32, 300000)
				for i := 0; ; i++ {
					if c.Rank() == 2 && i == 5 {
						die(ms, 2)
						return nil
					}
					if err := c.AllReduce(ctx, b, Sum); err != nil {
						return err
					}
				}
			})
			if ctx.Err() != nil {
				t.Fatal("ranks hung after rank 2 died")
			}
			for r, err := range errs {
				var pe *PeerError
				if r != 2 && (!errors.As(err, &pe) || pe.Rank != 2) {
					t.Errorf("rank %d: got %v, want a PeerError naming rank 2", r, err)
				}
			}
		})
	}
}

// TestShmAbortReachesEveryRank: a rank that aborts stops the others,
// across shared memory and TCP, with its reason.
func TestShmAbortReachesEveryRank(t *testing.T) {
	ms := shmWorld(t, 4, ShmConfig{}, TCPConfig{}, func(r int) string { return fmt.Sprint(r % 2) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := run(t, meshes(ms), Config{}, func(c *Comm) error {
		b := NewBuffer(Float32, 1000)
		for i := 0; ; i++ {
			if c.Rank() == 3 && i == 3 {
				ms[3].Abort(errors.New("out of patience"))
			}
			if err := c.AllReduce(ctx, b, Sum); err != nil {
				return err
			}
		}
	})
	for r, err := range errs {
		var pe *PeerError
		if !errors.As(err, &pe) || pe.Rank != 3 || !strings.Contains(err.Error(), "out of patience") {
			t.Errorf("rank %d: got %v, want rank 3's abort", r, err)
		}
	}
}

// TestShmCloseIsNotAFailure: a rank that closes its transport after its
// last send is not taken for a dead one: what it sent is received, and
// only later receives from it fail.
func TestShmCloseIsNotAFailure(t *testing.T) {
	ms := shmWorld(t, 3, ShmConfig{}, TCPConfig{}, oneMachine)
	ctx := context.Background()
	h := Header{Comm: 1, Seq: 1, Op: OpSendRecv, Algo: AlgoDirect, DType: Float32}
	for _, size := range []int{8, 200 << 10} {
		h.Seq++
		if err := ms[0].Send(ctx, 1, h, pattern(size, 5)); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		ms[0].Close()
	}()
	h.Seq = 1
	for _, size := range []int{8, 200 << 10} {
		h.Seq++
		in := make([]byte, size)
		if _, err := Recv(ctx, ms[1], 0, h, in); err != nil || !bytes.Equal(in, pattern(size, 5)) {
			t.Fatalf("%d bytes sent before rank 0 closed: %v", size, err)
		}
	}
	<-done
	h.Seq = 100
	var pe *PeerError
	if _, err := Recv(ctx, ms[1], 0, h, make([]byte, 4)); !errors.As(err, &pe) || pe.Rank != 0 || !strings.Contains(pe.Reason, "closed its transport") {
		t.Fatalf("a receive from a closed rank: %v", err)
	}
	// Ranks 1 and 2 go on.
	in := make([]byte, 4)
	r := ms[2].Post(1, h, in)
	if err := ms[1].Send(ctx, 2, h, []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(ctx); err != nil {
		t.Fatalf("ranks 1 and 2 after rank 0 closed: %v", err)
	}
}

// TestShmForeignSegmentRefused: a segment is mapped only if it is sealed,
// of the announced size, and carries the MAC of this rank's nonce under
// the job's secret.
func TestShmForeignSegmentRefused(t *testing.T) {
	var secret, other [32]byte
	other[0] = 1
	nonce := []byte("0123456789abcdef")
	ring := 4 << 10
	mk := func(seal bool, size int, key [32]byte) (int, []byte) {
		fd, err := unix.MemfdCreate("test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Ftruncate(fd, int64(size)); err != nil {
			t.Fatal(err)
		}
		mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		tok := shmMAC(key, nonce, 0, 2)
		copy(mem, shmMagic)
		mem[8] = shmVersion
		mem[12], mem[13] = byte(ring), byte(ring>>8)
		copy(mem[16:], tok)
		unix.Munmap(mem)
		if seal {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
				t.Fatal(err)
			}
		}
		m3 := make([]byte, 4+32+16)
		m3[0], m3[1] = byte(ring), byte(ring>>8)
		copy(m3[4:], tok)
		return fd, m3
	}
	want := shmMAC(secret, nonce, 0, 2)
	good := shmHeaderSize + 2*ring
	for _, tc := range []struct {
		name string
		seal bool
		size int
		key  [32]byte
		ok   bool
	}{
		{"this job's", true, good, secret, true},
		{"another job's", true, good, other, false},
		{"unsealed", false, good, secret, false},
		{"short", true, good - 4096, secret, false},
	} {
		fd, m3 := mk(tc.seal, tc.size, tc.key)
		mem, err := attachSegment(fd, m3, want)
		unix.Close(fd)
		if (err == nil) != tc.ok {
			t.Errorf("%s segment: %v", tc.name, err)
		}
		if mem != nil {
			unix.Munmap(mem)
		}
	}
}

// TestShmReleasesEverything: after Close nothing of the transport is
// left in the process: no mapping of a segment, no descriptor (the
// goroutines are checked by TestMain).
func TestShmReleasesEverything(t *testing.T) {
	maps := func() int {
		b, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(string(b), "commprof-shm")
	}
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	m0, f0 := maps(), fds()
	ms := shmWorld(t, 3, ShmConfig{}, TCPConfig{}, oneMachine)
	if got := maps() - m0; got != 6 {
		t.Errorf("3 ranks map %d segments, want 6 (one per rank and pair)", got)
	}
	for _, m := range ms {
		m.Close()
	}
	if got := maps() - m0; got != 0 {
		t.Errorf("%d segments still mapped after Close", got)
	}
	if got := fds() - f0; got > 0 {
		t.Errorf("%d more descriptors open after Close", got)
	}
}

// BenchmarkShmPingPong measures a message there and back between two
// ranks of this process, through shared memory and, for comparison,
// loopback TCP: the one-way latency and bandwidth.
func BenchmarkShmPingPong(b *testing.B) {
	for _, tr := range []string{"shm", "tcp"} {
		var ts []Transport
		if tr == "shm" {
			ts = meshes(shmWorld(b, 2, ShmConfig{}, TCPConfig{}, oneMachine))
		} else {
			ts = tcpWorld(b, 2, TCPConfig{})
		}
		for _, size := range []int{8, 64 << 10, 1 << 20, 16 << 20} {
			b.Run(fmt.Sprintf("%s/bytes=%d", tr, size), func(b *testing.B) {
				ctx := context.Background()
				bufs := [2][2][]byte{{make([]byte, size), make([]byte, size)}, {make([]byte, size), make([]byte, size)}}
				h := Header{Comm: 1, Op: OpSendRecv, Algo: AlgoDirect, DType: Float32}
				done := make(chan error, 1)
				go func() {
					for i := range b.N {
						h := h
						h.Seq = uint64(i)
						if _, err := Recv(ctx, ts[1], 0, h, bufs[1][0]); err != nil {
							done <- err
							return
						}
						if err := ts[1].Send(ctx, 0, h, bufs[1][1]); err != nil {
							done <- err
							return
						}
					}
					done <- nil
				}()
				b.SetBytes(int64(2 * size))
				b.ResetTimer()
				for i := range b.N {
					h := h
					h.Seq = uint64(i)
					r := ts[0].Post(1, h, bufs[0][0])
					if err := ts[0].Send(ctx, 1, h, bufs[0][1]); err != nil {
						b.Fatal(err)
					}
					if _, err := r.Wait(ctx); err != nil {
						b.Fatal(err)
					}
				}
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				oneWay := b.Elapsed().Seconds() / float64(2*b.N)
				b.ReportMetric(oneWay*1e6, "us/msg")
				b.ReportMetric(float64(size)/oneWay/1e9, "GB/s")
			})
		}
	}
}

// TestShmStrangersAtTheSocket: at a rank's Unix socket, a stranger that
// says nothing delays no one and is cut off when the set-up ends, one
// that does not know the secret is refused, and the real higher rank is
// handed to its pair.
func TestShmStrangersAtTheSocket(t *testing.T) {
	var secret [32]byte
	secret[3] = 7
	name := fmt.Sprintf("@commprof-shm-test-%d", os.Getpid())
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: name, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan shmAccepted, 1)
	done := make(chan struct{})
	// Join's deadline: a minute.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() {
		defer close(done)
		shmAccept(ctx, ln, 0, 2, secret, map[int]chan shmAccepted{1: ch})
	}()
	dial := func() *net.UnixConn {
		c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: name, Net: "unixpacket"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	greet := func(c *net.UnixConn, key [32]byte) {
		nonce := make([]byte, nonceLen)
		if _, err := c.Read(nonce); err != nil {
			t.Fatal(err)
		}
		var g [len(shmGreetMagic) + 8 + 32 + nonceLen]byte
		copy(g[:], shmGreetMagic)
		g[8], g[12] = 1, 2
		copy(g[16:], shmMAC(key, nonce, 1, 2))
		if _, err := c.Write(g[:]); err != nil {
			t.Fatal(err)
		}
	}
	silent := dial()
	var other [32]byte
	liar := dial()
	greet(liar, other)
	real := dial()
	greet(real, secret)
	a := <-ch // while the silent stranger still holds its connection
	defer a.c.Close()
	if a.pid != os.Getpid() {
		t.Errorf("the accepted rank's pid is %d, want %d", a.pid, os.Getpid())
	}
	ln.Close()
	select {
	case <-done: // although the stranger never spoke
	case <-time.After(20 * time.Second):
		t.Fatal("the set-up waited on a stranger that says nothing")
	}
	for what, c := range map[string]*net.UnixConn{"the silent stranger": silent, "the stranger without the secret": liar} {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var b [64]byte
		for {
			n, err := c.Read(b[:])
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("%s was not cut off when the set-up ended", what)
				break
			}
			if err != nil || n == 0 {
				break // cut off
			}
			if n != nonceLen {
				t.Errorf("%s was sent %d bytes", what, n)
			}
		}
	}
}

// pauseReceiver holds rank to's progress goroutine as soon as a message
// from rank from arrives, as a rank busy elsewhere would: nothing it is
// sent is consumed until the returned function lets it go on.
func pauseReceiver(ms []*Mesh, from, to int) (resume func()) {
	box := ms[to].shm.links[from].box
	box.mu.Lock() // the progress goroutine claims each message under it
	var once sync.Once
	return func() { once.Do(box.mu.Unlock) }
}

// sendWaiting sends p from rank 0 to rank 1 in a goroutine, and cancels
// the send once it is waiting for the peer. It returns what Send
// returned.
func sendWaiting(t *testing.T, ms []*Mesh, h Header, p []byte) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- ms[0].Send(ctx, 1, h, p) }()
	l := ms[0].shm.links[1]
	for deadline := time.Now().Add(20 * time.Second); !l.waiting.Load(); time.Sleep(time.Millisecond) {
		select {
		case err := <-done:
			t.Fatalf("the send returned (%v) without waiting for a peer that consumes nothing", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the send never waited for the peer")
		}
	}
	cancel()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("a send waiting for a peer that consumes nothing ignored its context")
	}
	return nil
}

// TestShmSendStopsWithItsContext: a Send that waits for a peer that
// consumes nothing (a full ring, an announced message not yet pulled)
// returns when its context ends, long before the peer timeout. Waiting
// before any of the message is in the ring, it leaves the link as it
// was: the message before it is received whole, and so are later ones.
// Waiting in the middle of a message, it fails the transport, so that the
// peer does not wait forever for the rest: the peer fails naming the
// interrupted rank.
func TestShmSendStopsWithItsContext(t *testing.T) {
	// No heartbeat is missed while the receiver is held.
	tcfg := TCPConfig{PeerTimeout: 10 * time.Minute}
	ring := 4 << 10
	h := Header{Comm: 1, Op: OpSendRecv, Algo: AlgoDirect, DType: Float32}
	bg := context.Background()

	t.Run("before the message", func(t *testing.T) {
		ms := shmWorld(t, 2, ShmConfig{RingBytes: ring, CopyOnceMin: -1}, tcfg, oneMachine)
		first, second := pattern(ring-shmRecHdr, 1), pattern(100, 2) // the first fills the ring
		h1, h2 := h, h
		h1.Seq, h2.Seq = 1, 2
		r1 := ms[1].Post(0, h1, make([]byte, len(first)))
		resume := pauseReceiver(ms, 0, 1)
		defer resume()
		if err := ms[0].Send(bg, 1, h1, first); err != nil {
			t.Fatal(err)
		}
		if err := sendWaiting(t, ms, h2, second); !errors.Is(err, context.Canceled) {
			t.Fatalf("the cancelled send returned %v, want context.Canceled", err)
		}
		if err := ms[0].shm.err(); err != nil {
			t.Fatalf("a send cancelled before any of its message was written failed the transport: %v", err)
		}
		resume()
		if _, err := r1.Wait(bg); err != nil {
			t.Fatalf("the message before the cancelled one: %v", err)
		}
		in := make([]byte, len(second))
		r2 := ms[1].Post(0, h2, in)
		if err := ms[0].Send(bg, 1, h2, second); err != nil {
			t.Fatalf("sending again after the cancelled send: %v", err)
		}
		if _, err := r2.Wait(bg); err != nil || !bytes.Equal(in, second) {
			t.Fatalf("the message sent again after the cancelled one: %v", err)
		}
	})

	for _, tc := range []struct {
		name string
		cfg  ShmConfig
		size int
	}{
		{"in the middle of a message through the ring", ShmConfig{RingBytes: ring, CopyOnceMin: -1}, 3 * ring},
		{"waiting for the peer to pull a message", ShmConfig{RingBytes: ring, CopyOnceMin: 1}, 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := shmWorld(t, 2, tc.cfg, tcfg, oneMachine)
			if tc.cfg.CopyOnceMin > 0 && !ms[0].shm.links[1].push {
				t.Skip("this kernel does not let a rank read its peer's memory: nothing is announced")
			}
			resume := pauseReceiver(ms, 0, 1)
			defer resume()
			h.Seq = 1
			p := pattern(tc.size, 3)
			if err := sendWaiting(t, ms, h, p); !errors.Is(err, context.Canceled) {
				t.Fatalf("the cancelled send returned %v, want context.Canceled", err)
			}
			var pe *PeerError
			if err := ms[0].shm.err(); !errors.As(err, &pe) || pe.Rank != 0 || !strings.Contains(pe.Reason, "interrupted in the middle of a message to rank 1") {
				t.Fatalf("after a send interrupted in the middle of its message, the sender's transport says %v", err)
			}
			if err := ms[0].Send(bg, 1, Header{Comm: 1, Seq: 2, Op: OpSendRecv, Algo: AlgoDirect, DType: Float32}, p[:8]); !errors.As(err, &pe) || pe.Rank != 0 {
				t.Fatalf("a later send: %v, want the interruption", err)
			}
			resume()
			for deadline := time.Now().Add(20 * time.Second); ms[1].shm.err() == nil; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the receiver was never told that the sender was interrupted")
				}
			}
			if err := ms[1].shm.err(); !errors.As(err, &pe) || pe.Rank != 0 || !strings.Contains(err.Error(), "interrupted") {
				t.Fatalf("the receiver failed with %v, want rank 0's interruption", err)
			}
		})
	}
}
