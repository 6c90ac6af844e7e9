package analyze

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/commprof/commprof/trace"
)

// The rank-by-rank tables follow the ranks a run shows, not a world size
// or a rank number read from a file: a run.json that says a million
// ranks beside three streams, a peer numbered a million, or a lone stream
// numbered a million give tables of the run's own size, and a problem
// names each rank left out.
func TestTablesFollowTheRanksTheRunShows(t *testing.T) {
	ringB := [][]int64{{0, 400, 0}, {0, 0, 400}, {400, 0, 0}}
	t.Run("world_size far beyond the streams", func(t *testing.T) {
		for _, world := range []int{65536, trace.MaxWorldSize - 1} {
			run := ringRun()
			run.Manifest.WorldSize = world
			s := Summarize(run)
			if !reflect.DeepEqual(s.Matrix.Dense().Bytes, ringB) {
				t.Fatalf("world %d: matrix %v, want the ring's 3 × 3", world, s.Matrix)
			}
			for _, row := range s.Skew.Series.Offset {
				if len(row) != 3 {
					t.Fatalf("world %d: a skew row of %d ranks, want 3", world, len(row))
				}
			}
			if s.Run.WorldSize != world {
				t.Errorf("world %d: the summary says world %d", world, s.Run.WorldSize)
			}
			if len(s.Problems) != 0 {
				t.Errorf("world %d: problems %q for ranks the run has no stream of (the reader reports those)", world, s.Problems)
			}
		}
	})
	t.Run("a peer far beyond", func(t *testing.T) {
		run := ringRun()
		far := int32(trace.MaxWorldSize - 1)
		for i := range run.Ranks {
			run.Ranks[i].Info.WorldSize = trace.MaxWorldSize
		}
		run.Ranks[1].Events = append(run.Ranks[1].Events,
			message(trace.KindRecv, 1, far, "allreduce", "ring", 0, 900, 50, 1<<20, 0),
			message(trace.KindSend, 1, far, "allreduce", "ring", 0, 950, 50, 1<<20, 0))
		s := Summarize(run)
		if !reflect.DeepEqual(s.Matrix.Dense().Bytes, ringB) {
			t.Fatalf("matrix %v, want the ring's 3 × 3", s.Matrix)
		}
		if s.Ranks[1].BytesRecv != 400+1<<20 {
			t.Errorf("rank 1 received %d bytes: the far message still counts in its totals", s.Ranks[1].BytesRecv)
		}
		wantProblem(t, s.Problems, "rank-00001.arrows", "column peer", "1048575", "left out of the traffic matrices")
	})
	t.Run("a lone stream far beyond", func(t *testing.T) {
		far := int32(trace.MaxWorldSize - 2)
		var evs []trace.Event
		for i := range int64(3) {
			evs = append(evs, coll(0, "allreduce", "ring", i, i*1000, 500, 64), coll(far, "allreduce", "ring", i, i*1000+100, 400, 64))
		}
		run := &trace.Run{Dir: "hand", Manifest: &trace.Manifest{Name: "hand", WorldSize: trace.MaxWorldSize - 1, Config: map[string]string{}}}
		for _, r := range []int32{0, far} {
			rk := trace.Rank{Info: trace.RankInfo{Rank: int(r), WorldSize: trace.MaxWorldSize - 1}}
			for _, e := range evs {
				if e.Rank == r {
					rk.Events = append(rk.Events, e)
				}
			}
			run.Ranks = append(run.Ranks, rk)
		}
		s := Summarize(run)
		if n := s.Matrix.Ranks; n != 1 {
			t.Errorf("a matrix of %d ranks, want rank 0's alone", n)
		}
		if len(s.Skew.Series.Offset) != 3 {
			t.Fatalf("skew series of %d calls, want 3", len(s.Skew.Series.Offset))
		}
		for _, row := range s.Skew.Series.Offset {
			if len(row) != 1 {
				t.Fatalf("a skew row of %d ranks, want 1", len(row))
			}
		}
		if len(s.Ranks) != 2 || s.Ranks[1].Rank != int(far) {
			t.Errorf("ranks %+v: the far rank's own figures are still shown", s.Ranks)
		}
		wantProblem(t, s.Problems, "rank-1048574.arrows", "column rank", "left out of the traffic matrices and the skew series")
	})
}

func wantProblem(t *testing.T, problems []string, parts ...string) {
	t.Helper()
	for _, p := range problems {
		all := true
		for _, part := range parts {
			all = all && strings.Contains(p, part)
		}
		if all {
			return
		}
	}
	t.Errorf("no problem says %q; problems: %q", parts, problems)
}

// TestRankWaitsMergesAsTheyCome: a rank's wait spans merged as they come
// (in order) or sorted (out of order, as calls on two communicators come)
// sum to the length of their union.
func TestRankWaitsMergesAsTheyCome(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for trial := range 200 {
		var calls []callRec
		var waits []int64
		var want [3][]span
		at := [3]int64{}
		for range 50 {
			r := rng.IntN(3)
			at[r] += rng.Int64N(100)
			start := at[r]
			if r == 2 && trial%2 == 0 {
				start = rng.Int64N(3000) // rank 2 out of order in half the trials
			}
			w := rng.Int64N(150) - 20
			calls = append(calls, callRec{rank: int32(r), start: start})
			waits = append(waits, w)
			if w > 0 {
				want[r] = append(want[r], span{start, start + w})
			}
		}
		order := newWaitOrder(3)
		order.add(calls, waits)
		got := rankWaits(func(f func([]callRec, [][2]int, []int64)) { f(calls, nil, waits) }, order, 3)
		for r := range 3 {
			if l := length(union(want[r])); got[r] != l {
				t.Fatalf("trial %d rank %d: %d ns of waits, want the union's %d", trial, r, got[r], l)
			}
		}
	}
}
