// Package bench measures collectives the way nccl-tests does: for each size
// it times every iteration of a collective on every rank, checks every
// result against the exact expected value, and reports the slowest rank's
// mean time with the algorithm and bus bandwidth.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/commprof/commprof/collectives"
)

// Spec says what to measure.
type Spec struct {
	Op            collectives.Op
	Min, Max      int64 // bytes of the whole buffer (the n-rank buffer for allgather and reducescatter)
	Factor        int64 // sizes grow by this factor from Min to Max
	Iters, Warmup int
	DType         collectives.DType
	Reduce        collectives.ReduceOp // sum, max or min
	Root          int
}

// Result is one row of the table. Times are the slowest rank's mean.
type Result struct {
	Op     string  `json:"op"`
	Ranks  int     `json:"ranks"`
	Bytes  int64   `json:"bytes"`
	Count  int     `json:"count"`
	DType  string  `json:"dtype"`
	Reduce string  `json:"reduce,omitempty"`
	Algo   string  `json:"algo"`
	TimeUS float64 `json:"time_us"`
	AlgBW  float64 `json:"algbw_gbs"`
	BusBW  float64 `json:"busbw_gbs"`
	Wrong  int64   `json:"wrong"`
}

// BusFactor is the nccl-tests factor that turns algorithm bandwidth into
// bus bandwidth for op on n ranks.
func BusFactor(op collectives.Op, n int) float64 {
	switch op {
	case collectives.OpAllReduce:
		return 2 * float64(n-1) / float64(n)
	case collectives.OpAllGather, collectives.OpReduceScatter:
		return float64(n-1) / float64(n)
	}
	return 1
}

// Validate checks a spec before any rank starts.
func (s Spec) Validate() error {
	switch s.Op {
	case collectives.OpAllReduce, collectives.OpBroadcast, collectives.OpReduce, collectives.OpAllGather, collectives.OpReduceScatter:
	default:
		return fmt.Errorf("cannot benchmark %v", s.Op)
	}
	switch {
	case s.Min < 0 || s.Max < s.Min:
		return fmt.Errorf("sizes from %d to %d bytes: want 0 <= min <= max", s.Min, s.Max)
	case s.Factor < 2:
		return fmt.Errorf("size factor %d: want at least 2", s.Factor)
	case s.Iters < 1:
		return fmt.Errorf("%d iterations: want at least 1", s.Iters)
	case s.Warmup < 0:
		return fmt.Errorf("%d warm-up iterations: want 0 or more", s.Warmup)
	case s.Reduce != collectives.Sum && s.Reduce != collectives.Max && s.Reduce != collectives.Min:
		return fmt.Errorf("reduction %v: the benchmark checks sum, max and min", s.Reduce)
	}
	return nil
}

// Sizes lists the sizes a spec measures.
func (s Spec) Sizes() []int64 {
	var out []int64
	for b := s.Min; b <= s.Max; {
		out = append(out, b)
		if b == 0 {
			b = int64(max(s.DType.Size(), 1))
			continue
		}
		b *= s.Factor
	}
	return out
}

// input is rank r's value at element i; every reduction of it over up to
// thousands of ranks is exact in float32.
func input(r, i int) float64 { return float64((r + 1) * (i%7 + 1)) }

func expected(op collectives.ReduceOp, n, i int) float64 {
	switch op {
	case collectives.Max:
		return input(n-1, i)
	case collectives.Min:
		return input(0, i)
	}
	return float64(n*(n+1)/2) * float64(i%7+1)
}

// Run measures every size of s on communicator c and calls each with every
// rank's result for a size (only rank 0 needs to print them).
func Run(ctx context.Context, c collectives.Communicator, s Spec, each func(Result)) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.Root < 0 || s.Root >= c.Size() {
		return fmt.Errorf("root %d is not a rank of %d", s.Root, c.Size())
	}
	es := int64(s.DType.Size())
	n, r := c.Size(), c.Rank()
	for _, size := range s.Sizes() {
		count := int(size / es)
		res := Result{Op: s.Op.String(), Ranks: n, Bytes: int64(count) * es, Count: count, DType: s.DType.String(),
			Algo: c.Algorithm(s.Op, count*int(es)).String()}
		if s.Op == collectives.OpAllReduce || s.Op == collectives.OpReduce || s.Op == collectives.OpReduceScatter {
			res.Reduce = s.Reduce.String()
		}
		lo, hi := collectives.BlockRange(count, n, r)
		full := collectives.NewBuffer(s.DType, count)
		var part collectives.Buffer
		if s.Op == collectives.OpAllGather || s.Op == collectives.OpReduceScatter {
			part = collectives.NewBuffer(s.DType, hi-lo)
		}
		var total time.Duration
		var wrong int64
		for it := range s.Warmup + s.Iters {
			// Fill, time the collective alone, then check.
			switch s.Op {
			case collectives.OpAllGather:
				fill(part, func(j int) float64 { return input(r, lo+j) })
				fill(full, func(int) float64 { return -1 })
			case collectives.OpReduceScatter:
				fill(full, func(i int) float64 { return input(r, i) })
				fill(part, func(int) float64 { return -1 })
			case collectives.OpBroadcast:
				fill(full, func(i int) float64 {
					if r == s.Root {
						return input(r, i)
					}
					return -1
				})
			default:
				fill(full, func(i int) float64 { return input(r, i) })
			}
			t0 := time.Now()
			var err error
			switch s.Op {
			case collectives.OpAllReduce:
				err = c.AllReduce(ctx, full, s.Reduce)
			case collectives.OpBroadcast:
				err = c.Broadcast(ctx, full, s.Root)
			case collectives.OpReduce:
				err = c.Reduce(ctx, full, s.Reduce, s.Root)
			case collectives.OpAllGather:
				err = c.AllGather(ctx, part, full)
			case collectives.OpReduceScatter:
				err = c.ReduceScatter(ctx, full, part, s.Reduce)
			}
			dt := time.Since(t0)
			if err != nil {
				return fmt.Errorf("%s of %d bytes: %w", s.Op, size, err)
			}
			if it >= s.Warmup {
				total += dt
			}
			switch s.Op {
			case collectives.OpAllReduce:
				wrong += countWrong(full, func(i int) float64 { return expected(s.Reduce, n, i) })
			case collectives.OpReduce:
				if r == s.Root {
					wrong += countWrong(full, func(i int) float64 { return expected(s.Reduce, n, i) })
				}
			case collectives.OpBroadcast:
				wrong += countWrong(full, func(i int) float64 { return input(s.Root, i) })
			case collectives.OpAllGather:
				wrong += countWrong(full, func(i int) float64 { return input(owner(count, n, i), i) })
			case collectives.OpReduceScatter:
				wrong += countWrong(part, func(j int) float64 { return expected(s.Reduce, n, lo+j) })
			}
		}
		// The slowest rank's mean time, and the wrong results of all ranks.
		stats := []float64{total.Seconds() / float64(s.Iters), float64(wrong)}
		maxT := collectives.Float64s(stats[:1])
		sumW := collectives.Float64s(stats[1:])
		if err := c.AllReduce(ctx, maxT, collectives.Max); err != nil {
			return fmt.Errorf("gathering timings: %w", err)
		}
		if err := c.AllReduce(ctx, sumW, collectives.Sum); err != nil {
			return fmt.Errorf("gathering result checks: %w", err)
		}
		sec := stats[0]
		res.TimeUS = sec * 1e6
		res.Wrong = int64(stats[1])
		if sec > 0 {
			res.AlgBW = float64(res.Bytes) / sec / 1e9
			res.BusBW = res.AlgBW * BusFactor(s.Op, n)
		}
		each(res)
	}
	return nil
}

func owner(count, n, i int) int {
	for q := range n {
		if lo, hi := collectives.BlockRange(count, n, q); i >= lo && i < hi {
			return q
		}
	}
	return -1
}

func fill(b collectives.Buffer, f func(i int) float64) {
	switch b.DType() {
	case collectives.Float32:
		x := b.Float32s()
		for i := range x {
			x[i] = float32(f(i))
		}
	case collectives.Float64:
		x := b.Float64s()
		for i := range x {
			x[i] = f(i)
		}
	case collectives.Int32:
		x := b.Int32s()
		for i := range x {
			x[i] = int32(f(i))
		}
	case collectives.Int64:
		x := b.Int64s()
		for i := range x {
			x[i] = int64(f(i))
		}
	}
}

func countWrong(b collectives.Buffer, want func(i int) float64) int64 {
	var bad int64
	switch b.DType() {
	case collectives.Float32:
		for i, v := range b.Float32s() {
			if float64(v) != want(i) {
				bad++
			}
		}
	case collectives.Float64:
		for i, v := range b.Float64s() {
			if v != want(i) {
				bad++
			}
		}
	case collectives.Int32:
		for i, v := range b.Int32s() {
			if float64(v) != want(i) {
				bad++
			}
		}
	case collectives.Int64:
		for i, v := range b.Int64s() {
			if float64(v) != want(i) {
				bad++
			}
		}
	}
	return bad
}

// TableHeader writes the comment line and column heads of the table.
func TableHeader(w io.Writer, s Spec, ranks int, algo string) {
	fmt.Fprintf(w, "# commprof bench %s: %d ranks, %s, %s, algo %s, %d iters, %d warm-up, root %d\n",
		s.Op, ranks, s.DType, s.Reduce, algo, s.Iters, s.Warmup, s.Root)
	fmt.Fprintf(w, "%12s %12s %8s %19s %12s %12s %12s %8s\n", "size(B)", "count", "type", "algo", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong")
}

// TableRow writes one result as a table row.
func TableRow(w io.Writer, r Result) {
	fmt.Fprintf(w, "%12d %12d %8s %19s %12.1f %12.3f %12.3f %8d\n", r.Bytes, r.Count, r.DType, r.Algo, r.TimeUS, r.AlgBW, r.BusBW, r.Wrong)
}

// JSON writes the results as one JSON array.
func JSON(w io.Writer, rs []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rs)
}
