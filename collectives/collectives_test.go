package collectives

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// val is rank r's input at element i: small integers, so every reduction
// is exact in every type and any order.
func val(r, i int) float64 { return float64((r*7+i*3)%11 - 5) }

func fill(b Buffer, f func(i int) float64) {
	for i := range b.Len() {
		set(b, i, f(i))
	}
}

func set(b Buffer, i int, v float64) {
	switch b.dtype {
	case Float32:
		b.Float32s()[i] = float32(v)
	case Float64:
		b.Float64s()[i] = v
	case Int32:
		b.Int32s()[i] = int32(v)
	case Int64:
		b.Int64s()[i] = int64(v)
	}
}

func get(b Buffer, i int) float64 {
	switch b.dtype {
	case Float32:
		return float64(b.Float32s()[i])
	case Float64:
		return b.Float64s()[i]
	case Int32:
		return float64(b.Int32s()[i])
	case Int64:
		return float64(b.Int64s()[i])
	}
	panic("bad dtype")
}

// reference reduces val over ranks 0..n-1 sequentially.
func reference(op ReduceOp, n, i int) float64 {
	acc := val(0, i)
	for r := 1; r < n; r++ {
		v := val(r, i)
		switch op {
		case Sum:
			acc += v
		case Prod:
			acc *= v
		case Max:
			acc = max(acc, v)
		case Min:
			acc = min(acc, v)
		}
	}
	return acc
}

func expect(b Buffer, what string, want func(i int) float64) error {
	for i := range b.Len() {
		if g, w := get(b, i), want(i); g != w {
			return fmt.Errorf("%s: element %d of %d is %v, want %v", what, i, b.Len(), g, w)
		}
	}
	return nil
}

var (
	dtypes = []DType{Float32, Float64, Int32, Int64}
	rops   = []ReduceOp{Sum, Max, Min, Prod}
)

// testTuning makes the ring and the chain cut even small buffers into
// several segments, so pipelining is exercised at test sizes.
var testTuning = Tuning{AllReduceRecursiveDoublingMax: 1 << 10, AllReduceRabenseifnerMax: 16 << 10, BroadcastTreeMax: 8 << 10, SegmentBytes: 4 << 10}

func sizes(n int) []int {
	return []int{0, 1, 2, max(n-1, 0), n + 1, 7*n + 3, 1000, 20011}
}

// TestCollectivesMatchReference checks every collective and algorithm
// against a sequential reference for 1 to 8 ranks over both transports.
func TestCollectivesMatchReference(t *testing.T) {
	for _, w := range worlds {
		for n := 1; n <= 8; n++ {
			t.Run(fmt.Sprintf("%s/ranks=%d", w.name, n), func(t *testing.T) {
				ts := w.make(t, n)
				testAll(t, ts)
			})
		}
	}
}

func testAll(t *testing.T, ts []Transport) {
	n := len(ts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	caseNo := 0
	for _, size := range sizes(n) {
		for _, op := range []Op{OpAllReduce, OpBroadcast, OpReduce, OpAllGather, OpReduceScatter} {
			for _, algo := range append([]Algo{AlgoAuto}, Algorithms(op)...) {
				caseNo++
				d, rop := dtypes[caseNo%len(dtypes)], rops[caseNo%len(rops)]
				root := caseNo % n
				name := fmt.Sprintf("%s/%s/%d×%s/%s/root=%d", op, algo, size, d, rop, root)
				cfg := Config{Algorithms: map[Op]Algo{op: algo}, Tuning: testTuning}
				errs := run(t, ts, cfg, func(c *Comm) error {
					return oneCase(ctx, c, op, d, rop, size, root)
				})
				for r, err := range errs {
					if err != nil {
						t.Fatalf("%s: rank %d: %v", name, r, err)
					}
				}
			}
		}
	}
	mustRun(t, ts, Config{}, func(c *Comm) error { return c.Barrier(ctx) })
}

func oneCase(ctx context.Context, c *Comm, op Op, d DType, rop ReduceOp, size, root int) error {
	n, r := c.Size(), c.Rank()
	switch op {
	case OpAllReduce:
		b := NewBuffer(d, size)
		fill(b, func(i int) float64 { return val(r, i) })
		if err := c.AllReduce(ctx, b, rop); err != nil {
			return err
		}
		return expect(b, "allreduce", func(i int) float64 { return reference(rop, n, i) })
	case OpBroadcast:
		b := NewBuffer(d, size)
		fill(b, func(i int) float64 { return val(r, i) })
		if err := c.Broadcast(ctx, b, root); err != nil {
			return err
		}
		return expect(b, "broadcast", func(i int) float64 { return val(root, i) })
	case OpReduce:
		b := NewBuffer(d, size)
		fill(b, func(i int) float64 { return val(r, i) })
		if err := c.Reduce(ctx, b, rop, root); err != nil {
			return err
		}
		if r == root {
			return expect(b, "reduce at root", func(i int) float64 { return reference(rop, n, i) })
		}
		return expect(b, "reduce off root (unchanged)", func(i int) float64 { return val(r, i) })
	case OpAllGather:
		lo, hi := BlockRange(size, n, r)
		in, out := NewBuffer(d, hi-lo), NewBuffer(d, size)
		fill(in, func(j int) float64 { return val(r, lo+j) })
		if err := c.AllGather(ctx, in, out); err != nil {
			return err
		}
		return expect(out, "allgather", func(i int) float64 {
			for q := range n {
				if a, b := BlockRange(size, n, q); i >= a && i < b {
					return val(q, i)
				}
			}
			return -99
		})
	case OpReduceScatter:
		lo, hi := BlockRange(size, n, r)
		in, out := NewBuffer(d, size), NewBuffer(d, hi-lo)
		fill(in, func(i int) float64 { return val(r, i) })
		if err := c.ReduceScatter(ctx, in, out, rop); err != nil {
			return err
		}
		if err := expect(in, "reducescatter input (unchanged)", func(i int) float64 { return val(r, i) }); err != nil {
			return err
		}
		return expect(out, "reducescatter", func(j int) float64 { return reference(rop, n, lo+j) })
	}
	return fmt.Errorf("no test for %v", op)
}

// TestConcurrentCollectives starts several non-blocking collectives at once
// on every rank; their messages must not mix.
func TestConcurrentCollectives(t *testing.T) {
	for _, w := range worlds {
		t.Run(w.name, func(t *testing.T) {
			ts := w.make(t, 5)
			ctx := context.Background()
			mustRun(t, ts, Config{Tuning: testTuning}, func(c *Comm) error {
				r := c.Rank()
				var reqs []Request
				var bufs []Buffer
				for k := range 12 {
					b := NewBuffer(Float32, 500+k*997)
					fill(b, func(i int) float64 { return val(r+k, i) })
					bufs = append(bufs, b)
					if k%3 == 2 {
						reqs = append(reqs, c.IBroadcast(ctx, b, k%5))
					} else {
						reqs = append(reqs, c.IAllReduce(ctx, b, Sum))
					}
				}
				for k, q := range reqs {
					if err := q.Wait(); err != nil {
						return err
					}
					want := func(i int) float64 {
						var s float64
						for q := range 5 {
							s += val(q+k, i)
						}
						return s
					}
					if k%3 == 2 {
						want = func(i int) float64 { return val(k%5+k, i) }
					}
					if err := expect(bufs[k], fmt.Sprintf("request %d", k), want); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
}

func TestSplitAndPointToPoint(t *testing.T) {
	for _, w := range worlds {
		t.Run(w.name, func(t *testing.T) {
			ts := w.make(t, 7)
			ctx := context.Background()
			mustRun(t, ts, Config{}, func(c *Comm) error {
				r := c.Rank()
				color := r % 3
				if r == 6 {
					color = -1
				}
				sub, err := c.Split(ctx, color, -r) // reverse order inside each group
				if err != nil {
					return err
				}
				if r == 6 {
					if sub != nil {
						return errors.New("negative color got a communicator")
					}
				} else {
					var members []int
					for q := 5; q >= 0; q-- {
						if q%3 == color {
							members = append(members, q)
						}
					}
					if sub.Size() != len(members) || sub.WorldRank(sub.Rank()) != r || sub.WorldRank(0) != members[0] {
						return fmt.Errorf("rank %d: sub-communicator of %d, rank %d, first member %d; want members %v", r, sub.Size(), sub.Rank(), sub.WorldRank(0), members)
					}
					b := Int64s([]int64{int64(r), 1})
					if err := sub.AllReduce(ctx, b, Sum); err != nil {
						return err
					}
					var s int64
					for _, q := range members {
						s += int64(q)
					}
					if got := b.Int64s(); got[0] != s || got[1] != int64(len(members)) {
						return fmt.Errorf("rank %d: sub allreduce %v, want [%d %d]", r, got, s, len(members))
					}
				}
				// A ring of point-to-point messages, two tags each way.
				n := c.Size()
				out := Float64s([]float64{float64(r), float64(r * r)})
				if err := c.Send(ctx, out, (r+1)%n, 7); err != nil {
					return err
				}
				if err := c.Send(ctx, Float64s([]float64{-1}), (r+1)%n, 8); err != nil {
					return err
				}
				in8, in7 := make([]float64, 1), make([]float64, 2)
				if err := c.Recv(ctx, Float64s(in8), (r+n-1)%n, 8); err != nil {
					return err
				}
				if err := c.Recv(ctx, Float64s(in7), (r+n-1)%n, 7); err != nil {
					return err
				}
				p := (r + n - 1) % n
				if in7[0] != float64(p) || in7[1] != float64(p*p) || in8[0] != -1 {
					return fmt.Errorf("rank %d received %v and %v", r, in7, in8)
				}
				return c.Barrier(ctx)
			})
		})
	}
}

// TestMismatchIsReported gives rank 1 a buffer of another length.
func TestMismatchIsReported(t *testing.T) {
	for _, w := range worlds {
		t.Run(w.name, func(t *testing.T) {
			ts := w.make(t, 2)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			errs := run(t, ts, Config{}, func(c *Comm) error {
				b := NewBuffer(Float32, 10+10*c.Rank())
				err := c.AllReduce(ctx, b, Sum)
				if err != nil {
					cancel() // the other rank waits for a message that never comes
				}
				return err
			})
			var me *MismatchError
			found := false
			for _, err := range errs {
				if errors.As(err, &me) && strings.Contains(err.Error(), "size mismatch") {
					found = true
				}
			}
			if !found {
				t.Fatalf("no rank reported a size mismatch: %v", errs)
			}
		})
	}
}

// TestDeadPeerFailsEveryRank kills rank 2 of 4 in the middle of a stream of
// collectives: every other rank must return an error naming rank 2, and
// none may hang.
func TestDeadPeerFailsEveryRank(t *testing.T) {
	for _, raw := range []RawIO{RawOff, RawLarge, RawOn} {
		t.Run(fmt.Sprintf("raw=%v", raw), func(t *testing.T) { deadPeerFailsEveryRank(t, raw) })
	}
}

func deadPeerFailsEveryRank(t *testing.T, raw RawIO) {
	ts := tcpWorld(t, 4, TCPConfig{RawIO: raw})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := run(t, ts, Config{}, func(c *Comm) error {
		b := NewBuffer(Float32, 300000)
		for i := 0; ; i++ {
			if c.Rank() == 2 && i == 5 {
				// Die without a word: the sockets close under the running
				// job, as when the process is killed.
				tcp := ts[2].(*TCP)
				tcp.closed.Store(true)
				for _, p := range tcp.peers {
					if p != nil {
						p.conn.Close()
					}
				}
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
		if r == 2 {
			continue
		}
		var pe *PeerError
		if !errors.As(err, &pe) || pe.Rank != 2 {
			t.Errorf("rank %d: got %v, want a PeerError naming rank 2", r, err)
		}
	}
}

func TestBadArguments(t *testing.T) {
	ts := NewLocal(2)
	defer ts[0].Close()
	defer ts[1].Close()
	c, err := New(ts[0], Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, err := range map[string]error{
		"no dtype":        c.AllReduce(ctx, Buffer{}, Sum),
		"bad root":        c.Broadcast(ctx, NewBuffer(Float32, 4), 2),
		"bad op":          c.AllReduce(ctx, NewBuffer(Float32, 4), ReduceOp(42)),
		"gather length":   c.AllGather(ctx, NewBuffer(Float32, 3), NewBuffer(Float32, 4)),
		"scatter length":  c.ReduceScatter(ctx, NewBuffer(Float32, 4), NewBuffer(Float32, 3), Sum),
		"negative tag":    c.Send(ctx, NewBuffer(Float32, 1), 1, -1),
		"recv bad peer":   c.Recv(ctx, NewBuffer(Float32, 1), 5, 0),
		"nonblocking bad": c.IAllReduce(ctx, Buffer{}, Sum).Wait(),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := New(ts[0], Config{Algorithms: map[Op]Algo{OpBroadcast: AlgoRabenseifner}}); err == nil {
		t.Error("broadcast accepted the rabenseifner algorithm")
	}
}

func TestTuningAndSizes(t *testing.T) {
	for in, want := range map[string]int64{"8": 8, "64K": 64 << 10, "4m": 4 << 20, "1G": 1 << 30} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "12Q", "1.5M"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	tu := DefaultTuning()
	if err := tu.Set("allreduce_rd_max=1K, segment=2M"); err != nil || tu.AllReduceRecursiveDoublingMax != 1024 || tu.SegmentBytes != 2<<20 {
		t.Errorf("Set: %v %+v", err, tu)
	}
	if err := tu.Set("nope=1"); err == nil || !strings.Contains(err.Error(), "segment") {
		t.Errorf("Set(nope=1) = %v; want an error listing the keys", err)
	}
}

// TestAutomaticChoice pins the allreduce algorithm chosen by size and rank
// count with the default thresholds (docs/collectives.md).
func TestAutomaticChoice(t *testing.T) {
	for _, tc := range []struct {
		ranks, bytes int
		want         Algo
	}{
		{2, 8, AlgoRecursiveDoubling},
		{2, 512 << 10, AlgoRecursiveDoubling},
		{2, 1 << 20, AlgoRabenseifner},
		{2, 8 << 20, AlgoRabenseifner},
		{2, 16 << 20, AlgoRing},
		{4, 32 << 10, AlgoRecursiveDoubling},
		{4, 64 << 10, AlgoRabenseifner},
		{4, 16 << 20, AlgoRing},
		{3, 1 << 20, AlgoRabenseifner},
		{3, 2 << 20, AlgoRing},
	} {
		ts := NewLocal(tc.ranks)
		c, err := New(ts[0], Config{})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Algorithm(OpAllReduce, tc.bytes); got != tc.want {
			t.Errorf("%d ranks, %d bytes: %s, want %s", tc.ranks, tc.bytes, got, tc.want)
		}
		for _, tr := range ts {
			tr.Close()
		}
	}
}

// TestDefaultTuningComplete: every threshold has a default.
func TestDefaultTuningComplete(t *testing.T) {
	v := reflect.ValueOf(DefaultTuning())
	for i := range v.NumField() {
		if v.Field(i).Int() <= 0 {
			t.Errorf("DefaultTuning().%s = %d", v.Type().Field(i).Name, v.Field(i).Int())
		}
	}
}
