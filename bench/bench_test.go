package bench

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/internal/busbw"
	"github.com/commprof/commprof/trace"
)

func TestSizesAndFactors(t *testing.T) {
	s := Spec{Min: 8, Max: 64 << 20, Factor: 4, DType: collectives.Float32}
	sz := s.Sizes()
	if len(sz) != 12 || sz[0] != 8 || sz[11] != 32<<20 {
		t.Fatalf("sizes %v", sz)
	}
	if z := (Spec{Min: 0, Max: 16, Factor: 2, DType: collectives.Float32}).Sizes(); len(z) != 4 || z[0] != 0 || z[1] != 4 {
		t.Fatalf("sizes from 0: %v", z)
	}
	for op, want := range map[collectives.Op]float64{
		collectives.OpAllReduce: 1.5, collectives.OpAllGather: 0.75, collectives.OpReduceScatter: 0.75,
		collectives.OpBroadcast: 1, collectives.OpReduce: 1,
	} {
		if got := busbw.Factor(op.String(), 4); got != want { // the benchmark's op names are the trace's
			t.Errorf("%v: factor %v, want %v", op, got, want)
		}
	}
}

// corrupting wraps a communicator and spoils one element of every
// allreduce result on one rank, which the benchmark must count.
type corrupting struct {
	collectives.Communicator
}

func (c corrupting) AllReduce(ctx context.Context, b collectives.Buffer, op collectives.ReduceOp) error {
	err := c.Communicator.AllReduce(ctx, b, op)
	if c.Rank() == 1 && b.DType() == collectives.Float32 && b.Len() > 0 { // not the float64 statistics
		b.Float32s()[b.Len()-1] += 1
	}
	return err
}

func runAll(t *testing.T, n int, s Spec, wrap func(collectives.Communicator) collectives.Communicator) []Result {
	t.Helper()
	return runRanks(t, n, func(int) Spec { return s }, wrap)
}

// runRanks runs the benchmark on n ranks, rank r with spec(r), and
// returns rank 0's rows.
func runRanks(t *testing.T, n int, spec func(r int) Spec, wrap func(collectives.Communicator) collectives.Communicator) []Result {
	t.Helper()
	ts := collectives.NewLocal(n)
	var mu sync.Mutex
	var rows []Result
	var wg sync.WaitGroup
	errs := make([]error, n)
	for r := range n {
		c, err := collectives.New(ts[r], collectives.Config{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer ts[r].Close()
			errs[r] = Run(context.Background(), wrap(c), spec(r), func(res Result) {
				if r == 0 {
					mu.Lock()
					rows = append(rows, res)
					mu.Unlock()
				}
			})
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return rows
}

func TestEveryOperationChecksOut(t *testing.T) {
	for _, op := range []collectives.Op{collectives.OpAllReduce, collectives.OpBroadcast, collectives.OpReduce, collectives.OpAllGather, collectives.OpReduceScatter} {
		for _, rop := range []collectives.ReduceOp{collectives.Sum, collectives.Max, collectives.Min} {
			s := Spec{Op: op, Min: 4, Max: 4096, Factor: 8, Iters: 2, Warmup: 1, DType: collectives.Float64, Reduce: rop, Root: 2}
			rows := runAll(t, 3, s, func(c collectives.Communicator) collectives.Communicator { return c })
			if len(rows) != 4 {
				t.Fatalf("%v: %d rows", op, len(rows))
			}
			for _, r := range rows {
				if r.Wrong != 0 || r.Ranks != 3 || r.Op != op.String() || r.TimeUS <= 0 {
					t.Errorf("%v %v: %+v", op, rop, r)
				}
			}
		}
	}
}

func TestWrongResultsAreCounted(t *testing.T) {
	s := Spec{Op: collectives.OpAllReduce, Min: 64, Max: 64, Factor: 2, Iters: 3, Warmup: 2, DType: collectives.Float32, Reduce: collectives.Sum}
	rows := runAll(t, 2, s, func(c collectives.Communicator) collectives.Communicator { return corrupting{c} })
	// Checked iterations: 2 warm-up and 1 after the timed ones, one bad element each.
	if len(rows) != 1 || rows[0].Wrong != 3 {
		t.Fatalf("rows %+v; want 3 wrong elements", rows)
	}
}

func TestValidate(t *testing.T) {
	good := Spec{Op: collectives.OpAllReduce, Min: 8, Max: 16, Factor: 2, Iters: 1, DType: collectives.Float32, Reduce: collectives.Sum}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mod := range map[string]func(*Spec){
		"barrier":   func(s *Spec) { s.Op = collectives.OpBarrier },
		"max < min": func(s *Spec) { s.Max = 4 },
		"factor 1":  func(s *Spec) { s.Factor = 1 },
		"no iters":  func(s *Spec) { s.Iters = 0 },
		"prod":      func(s *Spec) { s.Reduce = collectives.Prod },
	} {
		s := good
		mod(&s)
		if s.Validate() == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

// TestTimedMarksAreTheLoopsClock checks that the timed marks carry the
// readings the benchmark times its loop with: a recorder that takes its
// time to record the start mark (a rank descheduled on a busy machine)
// must not make the recorded loop longer than the measured one, or the
// report's figures would differ from the benchmark's table.
func TestTimedMarksAreTheLoopsClock(t *testing.T) {
	const n, iters = 3, 5
	type mark struct {
		at    time.Time
		value float64
	}
	marks := make([][]mark, n)
	spec := func(r int) Spec {
		s := Spec{Op: collectives.OpAllReduce, Min: 8, Max: 512, Factor: 8, Iters: iters, Warmup: 1, DType: collectives.Float32, Reduce: collectives.Sum}
		s.Mark = func(name string, at time.Time, value float64) {
			if name != trace.MarkTimed {
				t.Errorf("rank %d marked %q", r, name)
			}
			if value == 1 && r == 1 {
				time.Sleep(3 * time.Millisecond) // the recorder, descheduled
			}
			marks[r] = append(marks[r], mark{at, value})
		}
		return s
	}
	rows := runRanks(t, n, spec, func(c collectives.Communicator) collectives.Communicator { return c })
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	for i, row := range rows {
		var worst time.Duration
		for r := range n {
			if len(marks[r]) != 2*len(rows) {
				t.Fatalf("rank %d: %d marks, want %d", r, len(marks[r]), 2*len(rows))
			}
			start, end := marks[r][2*i], marks[r][2*i+1]
			if start.value != 1 || end.value != 0 {
				t.Fatalf("rank %d size %d: marks %v, %v", r, row.Bytes, start.value, end.value)
			}
			worst = max(worst, end.at.Sub(start.at))
		}
		want := worst.Seconds() / iters * 1e6
		if math.Abs(row.TimeUS-want) > 1e-9*want {
			t.Errorf("size %d: the benchmark timed %.6f us a call, its marks say %.6f", row.Bytes, row.TimeUS, want)
		}
		if want < 3000.0/iters {
			t.Errorf("size %d: %.1f us a call, less than rank 1's slow start mark spread over the loop", row.Bytes, want)
		}
	}
}
