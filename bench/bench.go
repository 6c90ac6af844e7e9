// Package bench measures collectives the way nccl-tests does: for each size
// it times iterations of a collective back to back on every rank, checks
// the results of the warm-up iterations and of one iteration after the
// timed ones against the exact expected values, and reports the slowest
// rank's mean time with the algorithm and bus bandwidth.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/commprof/commprof/internal/busbw"
	"io"
	"math"
	"strconv"
	"time"

	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/trace"
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
	// NoCheck skips checking the results (nccl-tests' -c 0): the warm-up
	// iterations are not checked and there is no checked iteration after
	// the timed ones. Results then carry Wrong -1.
	NoCheck bool
	// Mark, if set, records a mark on the rank's trace: Run marks the
	// start (1) and end (0) of each size's timed iterations with
	// trace.MarkTimed, so that a recorded run's figures leave the
	// warm-up and checking iterations out. The marks carry the very
	// clock readings the benchmark times its loop with, so that the
	// recorded loop is the measured one to the nanosecond.
	Mark func(name string, at time.Time, value float64)
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
	Wrong  int64   `json:"wrong"` // wrong elements over the ranks; -1 when not checked
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
		var wrong int64
		once := func() error {
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
			if err != nil {
				return fmt.Errorf("%s of %d bytes: %w", s.Op, size, err)
			}
			return nil
		}
		red := float64(n * (n + 1) / 2) // scale of the expected reduction
		switch s.Reduce {
		case collectives.Max:
			red = float64(n)
		case collectives.Min:
			red = 1
		}
		// As nccl-tests: checked warm-up iterations, a barrier, the timed
		// iterations back to back under one timer, then one more checked
		// iteration. Timing each call apart would time the ranks' skew
		// from filling and checking too.
		checked := func() error {
			switch s.Op {
			case collectives.OpAllGather:
				pattern(part, float64(r+1), lo)
				constant(full, -1)
			case collectives.OpReduceScatter:
				pattern(full, float64(r+1), 0)
				constant(part, -1)
			case collectives.OpBroadcast:
				if r == s.Root {
					pattern(full, float64(r+1), 0)
				} else {
					constant(full, -1)
				}
			default:
				pattern(full, float64(r+1), 0)
			}
			if err := once(); err != nil {
				return err
			}
			switch s.Op {
			case collectives.OpAllReduce:
				wrong += mismatches(full, red, 0)
			case collectives.OpReduce:
				if r == s.Root {
					wrong += mismatches(full, red, 0)
				}
			case collectives.OpBroadcast:
				wrong += mismatches(full, float64(s.Root+1), 0)
			case collectives.OpAllGather:
				for q := range n {
					qlo, qhi := collectives.BlockRange(count, n, q)
					wrong += mismatches(full.Slice(qlo, qhi), float64(q+1), qlo)
				}
			case collectives.OpReduceScatter:
				wrong += mismatches(part, red, lo)
			}
			return nil
		}
		warm := checked
		if s.NoCheck {
			warm = once
		}
		for range s.Warmup {
			if err := warm(); err != nil {
				return err
			}
		}
		if err := c.Barrier(ctx); err != nil {
			return err
		}
		mark := s.Mark
		if mark == nil {
			mark = func(string, time.Time, float64) {}
		}
		t0 := time.Now()
		mark(trace.MarkTimed, t0, 1)
		for range s.Iters {
			if err := once(); err != nil {
				return err
			}
		}
		t1 := time.Now()
		mark(trace.MarkTimed, t1, 0)
		total := t1.Sub(t0)
		if !s.NoCheck {
			if err := checked(); err != nil {
				return err
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
		if s.NoCheck {
			res.Wrong = -1
		}
		if sec > 0 {
			res.AlgBW = float64(res.Bytes) / sec / 1e9
			res.BusBW = res.AlgBW * busbw.Factor(s.Op.String(), n)
		}
		each(res)
	}
	return nil
}

// The benchmark's data: rank r holds (r+1)·((i mod 7)+1) at element i, so
// every sum, max and min over ranks is exact and of the same form.

// pattern sets b[j] = scale·(((off+j) mod 7)+1).
func pattern(b collectives.Buffer, scale float64, off int) {
	switch b.DType() {
	case collectives.Float32:
		patternT(b.Float32s(), float32(scale), off)
	case collectives.Float64:
		patternT(b.Float64s(), scale, off)
	case collectives.Int32:
		patternT(b.Int32s(), int32(scale), off)
	case collectives.Int64:
		patternT(b.Int64s(), int64(scale), off)
	}
}

// mismatches counts the elements that differ from pattern(b, scale, off).
func mismatches(b collectives.Buffer, scale float64, off int) int64 {
	switch b.DType() {
	case collectives.Float32:
		return mismatchesT(b.Float32s(), float32(scale), off)
	case collectives.Float64:
		return mismatchesT(b.Float64s(), scale, off)
	case collectives.Int32:
		return mismatchesT(b.Int32s(), int32(scale), off)
	case collectives.Int64:
		return mismatchesT(b.Int64s(), int64(scale), off)
	}
	return 0
}

func constant(b collectives.Buffer, v float64) {
	switch b.DType() {
	case collectives.Float32:
		fillT(b.Float32s(), float32(v))
	case collectives.Float64:
		fillT(b.Float64s(), v)
	case collectives.Int32:
		fillT(b.Int32s(), int32(v))
	case collectives.Int64:
		fillT(b.Int64s(), int64(v))
	}
}

type number interface {
	~float32 | ~float64 | ~int32 | ~int64
}

func patternT[T number](x []T, scale T, off int) {
	var vals [7]T
	for k := range vals {
		vals[k] = scale * T(k+1)
	}
	j := off % 7
	for i := range x {
		x[i] = vals[j]
		if j++; j == 7 {
			j = 0
		}
	}
}

func mismatchesT[T number](x []T, scale T, off int) int64 {
	var vals [7]T
	for k := range vals {
		vals[k] = scale * T(k+1)
	}
	var bad int64
	j := off % 7
	for i := range x {
		if x[i] != vals[j] {
			bad++
		}
		if j++; j == 7 {
			j = 0
		}
	}
	return bad
}

func fillT[T number](x []T, v T) {
	for i := range x {
		x[i] = v
	}
}

// TableHeader writes the comment lines and column heads of the table;
// transport, if not empty, says how the messages move.
func TableHeader(w io.Writer, s Spec, ranks int, algo, transport string) {
	fmt.Fprintf(w, "# commprof bench %s: %d ranks, %s, %s, algo %s, %d iters, %d warm-up, root %d\n",
		s.Op, ranks, s.DType, s.Reduce, algo, s.Iters, s.Warmup, s.Root)
	if transport != "" {
		fmt.Fprintf(w, "# %s\n", transport)
	}
	fmt.Fprintf(w, "%12s %12s %8s %19s %12s %12s %12s %8s\n", "size(B)", "count", "type", "algo", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong")
}

// TableRow writes one result as a table row.
func TableRow(w io.Writer, r Result) {
	wrong := strconv.FormatInt(r.Wrong, 10)
	if r.Wrong < 0 {
		wrong = "N/A"
	}
	fmt.Fprintf(w, "%12d %12d %8s %19s %12.1f %12.3f %12.3f %8s\n", r.Bytes, r.Count, r.DType, r.Algo, r.TimeUS, r.AlgBW, r.BusBW, wrong)
}

// TableFooter writes nccl-tests' closing lines: the wrong elements over
// every size, and the mean of the rows' busbw.
func TableFooter(w io.Writer, rs []Result) {
	var wrong int64
	var bw float64
	checked := false
	for _, r := range rs {
		if r.Wrong >= 0 {
			wrong += r.Wrong
			checked = true
		}
		bw += r.BusBW
	}
	verdict := "OK"
	switch {
	case !checked:
		verdict = "N/A (not checked)"
	case wrong > 0:
		verdict = "FAILED"
	}
	if !checked {
		fmt.Fprintf(w, "# Out of bounds values : %s\n", verdict)
	} else {
		fmt.Fprintf(w, "# Out of bounds values : %d %s\n", wrong, verdict)
	}
	if len(rs) > 0 {
		bw /= float64(len(rs))
	}
	fmt.Fprintf(w, "# Avg bus bandwidth    : %g \n#\n", math.Round(bw*1e6)/1e6)
}

// JSON writes the results as one JSON array.
func JSON(w io.Writer, rs []Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rs)
}
