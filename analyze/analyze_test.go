package analyze

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/commprof/commprof/trace"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// ev builds an event with the "none" values of the trace format.
func ev(k trace.Kind, rank int32, name string, start, dur int64) trace.Event {
	return trace.Event{Rank: rank, Kind: k, Name: name, Start: start, Dur: dur, Peer: -1, Seq: -1, Step: -1, Root: -1, Chunk: -1, Comm: "world"}
}

func coll(rank int32, op, algo string, seq, start, dur, bytes int64) trace.Event {
	e := ev(trace.KindCollective, rank, op, start, dur)
	e.Algo, e.Seq, e.Bytes, e.DType = algo, seq, bytes, "float32"
	return e
}

func message(k trace.Kind, rank, peer int32, op, algo string, seq, start, dur, bytes, wait int64) trace.Event {
	e := ev(k, rank, op, start, dur)
	e.Peer, e.Algo, e.Seq, e.Bytes, e.Wait = peer, algo, seq, bytes, wait
	return e
}

func runOf(world int, events ...trace.Event) *trace.Run {
	run := &trace.Run{Dir: "hand", Manifest: &trace.Manifest{Name: "hand", WorldSize: world, Config: map[string]string{}}}
	for r := range world {
		rk := trace.Rank{Info: trace.RankInfo{Rank: r, WorldSize: world, Host: "h"}}
		for _, e := range events {
			if int(e.Rank) == r {
				rk.Events = append(rk.Events, e)
			}
		}
		run.Ranks = append(run.Ranks, rk)
	}
	return run
}

// A deliberately late rank: rank 2 arrives 100µs after ranks 0 and 1 in
// every call, and each call then takes 50µs once everyone is there.
func lateRun() *trace.Run {
	var evs []trace.Event
	for i := range int64(4) {
		t0 := i * 1_000_000
		evs = append(evs,
			coll(0, "allreduce", "ring", i, t0, 150_000, 4096),
			coll(1, "allreduce", "ring", i, t0+10_000, 140_000, 4096),
			coll(2, "allreduce", "ring", i, t0+100_000, 50_000, 4096))
	}
	return runOf(3, evs...)
}

func TestSkewWithALateRank(t *testing.T) {
	s := Summarize(lateRun())
	if s.Skew.Calls != 4 || s.Skew.Dist.Mean != 100_000 || s.Skew.Dist.Max != 100_000 || s.Skew.Dist.P50 != 100_000 {
		t.Fatalf("skew: %+v", s.Skew.Dist)
	}
	if !reflect.DeepEqual(s.Skew.Ranking, []int{2, 1, 0}) {
		t.Fatalf("straggler ranking %v, want [2 1 0]", s.Skew.Ranking)
	}
	want := []struct {
		wait, last int64
		late       float64
	}{
		{4 * 100_000, 0, -55_000}, // rank 0 arrives 55µs before the mean of the others (10µs and 100µs)
		{4 * 90_000, 0, -40_000},  // 10 - (0+100)/2
		{0, 4, 95_000},            // 100 - (0+10)/2
	}
	for r, w := range want {
		got := s.Ranks[r]
		if got.WaitNS != w.wait || got.LastArrivals != w.last || got.MeanLateNS != w.late {
			t.Errorf("rank %d: wait %d last %d late %.0f, want %d %d %.0f", r, got.WaitNS, got.LastArrivals, got.MeanLateNS, w.wait, w.last, w.late)
		}
	}
	h := s.Headline
	if h.Straggler != 2 || h.StragglerFrac != 1 || h.StragglerLateNS != 95_000 {
		t.Fatalf("headline straggler: %+v", h)
	}
	// Total comm is 4*(150+140+50) µs; waits 4*(100+90) µs.
	if got, want := h.WaitFraction, 190.0/340; math.Abs(got-want) > 1e-12 {
		t.Fatalf("wait fraction %v, want %v", got, want)
	}
	if len(s.Skew.Series.Seq) != 4 || !reflect.DeepEqual(s.Skew.Series.Offset[0], []int64{0, 10_000, 100_000}) {
		t.Fatalf("skew series: %+v", s.Skew.Series)
	}
	// The replay holds rank 2's own work before each call to the median
	// rank's (rank 1, 10 µs behind rank 0): that saves 90 µs at each call
	// but the first (whose own work before it is not known).
	if st := s.Stragglers; !reflect.DeepEqual(st.Named, []int{2}) || st.Ranks[0].Rank != 2 || st.Ranks[0].CostNS != 3*90_000 || st.ReplayErrorNS != 0 ||
		st.Ranks[0].WorkNS != st.Ranks[0].CostNS || st.Ranks[0].TransferNS != 0 {
		t.Fatalf("stragglers: %+v", st)
	}
	if !bytes.Contains([]byte(strings.Join(s.Findings, "\n")), []byte("rank 2 is a straggler: its slowness cost the job 270 µs")) {
		t.Fatalf("findings: %q", s.Findings)
	}
}

// Two ranks late alike hide each other: holding either alone to the
// others' pace saves nothing, as the other is still late; holding both
// saves 600µs at each call but the first, over half the run (a pair is
// named only when each costs a quarter of it: ranks sharing a busy core
// make pairs too). Both are named, and each is given half of what holding
// both saves.
func TestTwoStragglersAlike(t *testing.T) {
	var evs []trace.Event
	for i := range int64(6) {
		t0 := i * 1_000_000
		evs = append(evs,
			coll(0, "allreduce", "ring", i, t0, 650_000, 4096),
			coll(1, "allreduce", "ring", i, t0+600_000, 50_000, 4096),
			coll(2, "allreduce", "ring", i, t0, 650_000, 4096),
			coll(3, "allreduce", "ring", i, t0+600_000, 50_000, 4096))
	}
	st := Summarize(runOf(4, evs...)).Stragglers
	if named := slices.Sorted(slices.Values(st.Named)); !reflect.DeepEqual(named, []int{1, 3}) {
		t.Fatalf("named %v, want [1 3]: %+v", st.Named, st.Ranks)
	}
	for _, rc := range st.Ranks[:2] {
		if rc.CostNS != 1_500_000 || rc.AloneNS != 0 {
			t.Errorf("rank %d: cost %d ns (alone %d), want half of 5 x 600µs, and nothing alone", rc.Rank, rc.CostNS, rc.AloneNS)
		}
	}
	if st.WithoutNS >= st.WindowNS || st.WindowNS-st.WithoutNS < 480_000 {
		t.Errorf("a call takes %.0f ns, %.0f without the two: want about 600µs less", st.WindowNS, st.WithoutNS)
	}
	// Late by a sixth as much, the pair costs each under a quarter of the
	// run: not told from two ranks that share a busy core.
	for i := range evs {
		if evs[i].Rank%2 == 1 {
			evs[i].Start -= 500_000
		} else {
			evs[i].Dur -= 500_000
		}
	}
	if st := Summarize(runOf(4, evs...)).Stragglers; len(st.Named) != 0 {
		t.Errorf("100µs late alike: named %v", st.Named)
	}
}

// A rank held up inside each transfer after the others have their
// results (stopped, descheduled) arrives late at the next call although
// its own work between calls is as long as anyone's: its part of the
// transfer beyond the other members' is its own slowness.
func TestStragglerSlowInItsOwnTransfer(t *testing.T) {
	var evs []trace.Event
	const late, tail = 250_000, 50_000
	for i := range int64(6) {
		t0 := i * 1_000_000
		arrive := t0 // rank 1's arrival: late after the first call
		if i > 0 {
			arrive = t0 + late
		}
		for r := range int32(4) {
			if r == 1 {
				evs = append(evs, coll(r, "allreduce", "ring", i, arrive, tail+late, 4096))
			} else {
				evs = append(evs, coll(r, "allreduce", "ring", i, t0, arrive-t0+tail, 4096))
			}
		}
	}
	st := Summarize(runOf(4, evs...)).Stragglers
	if !reflect.DeepEqual(st.Named, []int{1}) || st.ReplayErrorNS != 0 {
		t.Fatalf("named %v (replay error %d ns), want [1]: %+v", st.Named, st.ReplayErrorNS, st.Ranks)
	}
	// Each of its six transfers is 250µs longer than the others'.
	if c := st.Ranks[0].CostNS; c != 6*late {
		t.Errorf("rank 1's cost %d ns, want %d", c, 6*late)
	}
}

// A rank stopped in the middle of each transfer holds up every member:
// they all finish late, the others waiting for its messages, while it
// waited for no one. The time it was stopped is its own, and the others'
// waits go with it when it is held to the others' pace.
func TestStragglerStoppedMidTransfer(t *testing.T) {
	const stop, tail = 300_000, 50_000
	var evs []trace.Event
	for i := range int64(6) {
		t0 := i * 1_000_000
		for r := range int32(4) {
			evs = append(evs, coll(r, "allreduce", "ring", i, t0, tail+stop, 4096))
			// Each rank receives from the one before it; rank 1's messages
			// leave late, so rank 2 waits, and the ring passes it on.
			wait := int64(stop)
			if r == 1 {
				wait = 0
			}
			evs = append(evs, message(trace.KindRecv, r, (r+3)%4, "allreduce", "ring", i, t0+10_000, wait+10_000, 1024, wait))
		}
	}
	st := Summarize(runOf(4, evs...)).Stragglers
	if !reflect.DeepEqual(st.Named, []int{1}) || st.ReplayErrorNS != 0 {
		t.Fatalf("named %v (replay error %d ns), want [1]: %+v", st.Named, st.ReplayErrorNS, st.Ranks)
	}
	if c := st.Ranks[0].CostNS; c != 6*stop || st.Ranks[0].TransferNS != c || st.Ranks[0].WorkNS != 0 {
		t.Errorf("rank 1's cost %d ns (work %d, transfers %d), want its six stops, %d, all in transfers", c, st.Ranks[0].WorkNS, st.Ranks[0].TransferNS, 6*stop)
	}
}

func TestCollectiveStats(t *testing.T) {
	s := Summarize(lateRun())
	if len(s.Collectives) != 1 {
		t.Fatalf("collectives: %+v", s.Collectives)
	}
	c := s.Collectives[0]
	// 12 rank events: 4 each of 150, 140 and 50 µs.
	if c.Op != "allreduce" || c.Algo != "ring" || c.Bucket != 13 || c.BucketLbl != "4KiB-8KiB" || c.Calls != 4 || c.Ranks != 3 || c.Bytes != 4*4096 {
		t.Fatalf("group: %+v", c)
	}
	if c.Time.N != 12 || c.Time.Sum != 4*340_000 || c.Time.P50 != 140_000 || c.Time.P95 != 150_000 || c.Time.Max != 150_000 {
		t.Fatalf("time: %+v", c.Time)
	}
	mean := 340_000.0 / 3
	if math.Abs(c.Time.Mean-mean) > 1e-6 || math.Abs(c.AlgBWGBps-4096/mean) > 1e-12 || math.Abs(c.BusBWGBps-4096/mean*4/3) > 1e-12 {
		t.Fatalf("bandwidth: algbw %v busbw %v", c.AlgBWGBps, c.BusBWGBps)
	}
	if c.WaitNS != 4*190_000 {
		t.Fatalf("wait %d", c.WaitNS)
	}
	if len(s.Ops) != 1 || s.Ops[0].Share != 1 || s.Ops[0].Calls != 4 {
		t.Fatalf("ops: %+v", s.Ops)
	}
}

// Known compute and communication spans on one rank, in two steps:
//
//	step 0 [0,100):   compute [0,40) [50,80); allreduce [30,60)
//	step 1 [100,200): compute [100,150);      allreduce [140,190), broadcast [170,180) inside it
func overlapRun() *trace.Run {
	st := func(step int32, start, dur int64) trace.Event {
		e := ev(trace.KindStep, 0, "step", start, dur)
		e.Step = step
		return e
	}
	return runOf(1,
		st(0, 0, 100), ev(trace.KindCompute, 0, "forward", 0, 40), ev(trace.KindCompute, 0, "backward", 50, 30),
		coll(0, "allreduce", "ring", 0, 30, 30, 1000),
		st(1, 100, 100), ev(trace.KindCompute, 0, "forward", 100, 50),
		coll(0, "allreduce", "ring", 1, 140, 50, 1000), coll(0, "broadcast", "tree", 2, 170, 10, 10))
}

func TestOverlapAndSteps(t *testing.T) {
	s := Summarize(overlapRun())
	want := []StepStats{
		// comm 30, overlapped [30,40)+[50,60)=20, exposed 10, idle 100-70-10
		{Step: 0, Ranks: 1, StartNS: 0, TimeNS: 100, MaxNS: 100, ComputeNS: 70, ExposedNS: 10, OverlappedNS: 20, IdleNS: 20, CommBytes: 1000},
		// comm [140,190)=50, overlapped [140,150)=10, exposed 40, idle 100-50-40
		{Step: 1, Ranks: 1, StartNS: 100, TimeNS: 100, MaxNS: 100, ComputeNS: 50, ExposedNS: 40, OverlappedNS: 10, IdleNS: 10, CommBytes: 1010},
	}
	if !reflect.DeepEqual(s.Steps, want) {
		t.Fatalf("steps:\n got %+v\nwant %+v", s.Steps, want)
	}
	r := s.Ranks[0]
	if r.ComputeNS != 120 || r.CommNS != 80 || r.OverlappedNS != 30 || r.ExposedNS != 50 {
		t.Fatalf("rank: %+v", r)
	}
	ss := s.StepSummary
	if ss.Steps != 2 || ss.ComputeNS != 60 || ss.ExposedNS != 25 || ss.OverlappedNS != 15 || ss.IdleNS != 15 || ss.Time.Mean != 100 {
		t.Fatalf("step summary: %+v", ss)
	}
	if h := s.Headline; h.CommFraction != 0.4 || h.ExposedFrac != 25.0/40 || h.ExposedNS != 25 {
		t.Fatalf("headline: %+v", h)
	}
	if !reflect.DeepEqual(s.Compute, []NameTime{{"forward", 2, 90}, {"backward", 1, 30}}) {
		t.Fatalf("compute: %+v", s.Compute)
	}
}

func TestThroughputUsesTheGlobalBatch(t *testing.T) {
	run := overlapRun()
	run.Manifest.Config["batch_size"] = "32"
	s := Summarize(run)
	// One rank of 32 samples per 100 ns step.
	if s.Run.SamplesPerStep != 32 || s.StepSummary.SamplesPerSec != 32/(100e-9) {
		t.Fatalf("samples: %d per step, %v/s", s.Run.SamplesPerStep, s.StepSummary.SamplesPerSec)
	}
}

// Three ranks in a ring: each sends 100 bytes to the next per step index.
func ringRun() *trace.Run {
	var evs []trace.Event
	for r := range int32(3) {
		next, prev := (r+1)%3, (r+2)%3
		evs = append(evs, coll(r, "allreduce", "ring", 0, 0, 1000, 300))
		for k := range int64(4) {
			evs = append(evs,
				message(trace.KindSend, r, next, "allreduce", "ring", 0, 10+k*100, 20, 100, 0),
				message(trace.KindRecv, r, prev, "allreduce", "ring", 0, 10+k*100, 50, 100, 30))
		}
	}
	return runOf(3, evs...)
}

func TestMatrixAndSizes(t *testing.T) {
	s := Summarize(ringRun())
	wantB := [][]int64{{0, 400, 0}, {0, 0, 400}, {400, 0, 0}}
	wantM := [][]int64{{0, 4, 0}, {0, 0, 4}, {4, 0, 0}}
	wantT := [][]int64{{0, 200, 0}, {0, 0, 200}, {200, 0, 0}}
	d := s.Matrix.Dense()
	if !reflect.DeepEqual(d.Bytes, wantB) || !reflect.DeepEqual(d.Messages, wantM) || !reflect.DeepEqual(d.TimeNS, wantT) {
		t.Fatalf("matrix: %+v", s.Matrix)
	}
	// Only the pairs with traffic are cells, by sender then receiver.
	if c := s.Matrix.Cells; s.Matrix.Ranks != 3 || len(c) != 3 || c[0].Src != 0 || c[0].Dst != 1 || c[2].Src != 2 || c[2].Dst != 0 {
		t.Fatalf("matrix cells: %+v", s.Matrix)
	}
	if len(s.OpMatrices) != 1 || s.OpMatrices[0].Op != "allreduce" || s.OpMatrices[0].Pattern != "ring" || !reflect.DeepEqual(s.OpMatrices[0].Dense().Bytes, wantB) {
		t.Fatalf("op matrices: %+v", s.OpMatrices)
	}
	want := []SizeStats{{Op: "allreduce", Bucket: 7, BucketLbl: "64B-128B", Messages: 12, Bytes: 1200, TimeNS: 600, WaitNS: 360, GBps: 1200.0 / 240}}
	if !reflect.DeepEqual(s.MessageSizes, want) {
		t.Fatalf("sizes: %+v", s.MessageSizes)
	}
	r := s.Ranks[1]
	if r.BytesSent != 400 || r.BytesRecv != 400 || r.MsgsSent != 4 || r.MsgsRecv != 4 || r.SendNS != 80 || r.RecvNS != 200 || r.RecvWaitNS != 120 {
		t.Fatalf("rank 1: %+v", r)
	}
	if len(s.Patterns) != 1 || s.Patterns[0].Pattern != PatternRing || s.Patterns[0].Sampled != 1 || s.Ops[0].Pattern != PatternRing {
		t.Fatalf("patterns: %+v", s.Patterns)
	}
}

func TestClassify(t *testing.T) {
	all := func(n int) []int {
		m := make([]int, n)
		for i := range m {
			m[i] = i
		}
		return m
	}
	sym := func(es ...[2]int) [][2]int {
		var out [][2]int
		for _, e := range es {
			out = append(out, e, [2]int{e[1], e[0]})
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		members []int
		edges   [][2]int
		want    string
	}{
		{"ring of 5", all(5), [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 0}}, PatternRing},
		{"ring in another order", all(4), [][2]int{{0, 2}, {2, 1}, {1, 3}, {3, 0}}, PatternRing},
		{"bidirectional ring", all(5), sym([2]int{0, 1}, [2]int{1, 2}, [2]int{2, 3}, [2]int{3, 4}, [2]int{4, 0}), PatternRing},
		{"sub-communicator ring", []int{1, 3, 5}, [][2]int{{1, 3}, {3, 5}, {5, 1}}, PatternRing},
		{"chain broadcast", all(4), [][2]int{{0, 1}, {1, 2}, {2, 3}}, PatternChain},
		{"binomial broadcast of 4", all(4), [][2]int{{0, 2}, {0, 1}, {2, 3}}, PatternTree},
		{"binomial broadcast of 8", all(8), [][2]int{{0, 4}, {0, 2}, {0, 1}, {4, 6}, {4, 5}, {2, 3}, {6, 7}}, PatternTree},
		{"tree allreduce", all(4), sym([2]int{0, 1}, [2]int{0, 2}, [2]int{2, 3}), PatternTree},
		{"butterfly of 4", all(4), sym([2]int{0, 1}, [2]int{2, 3}, [2]int{0, 2}, [2]int{1, 3}), PatternButterfly},
		{"butterfly of 8", all(8), sym([2]int{0, 1}, [2]int{2, 3}, [2]int{4, 5}, [2]int{6, 7}, [2]int{0, 2}, [2]int{1, 3}, [2]int{4, 6},
			[2]int{5, 7}, [2]int{0, 4}, [2]int{1, 5}, [2]int{2, 6}, [2]int{3, 7}), PatternButterfly},
		{"parameter server", all(5), sym([2]int{0, 1}, [2]int{0, 2}, [2]int{0, 3}, [2]int{0, 4}), PatternStar},
		{"all-to-all", all(3), sym([2]int{0, 1}, [2]int{0, 2}, [2]int{1, 2}), PatternAllToAll},
		{"two ranks", all(2), sym([2]int{0, 1}), PatternDirect},
		{"dissemination barrier", all(4), [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 0}, {0, 2}, {1, 3}, {2, 0}, {3, 1}}, PatternDissemination},
		{"no messages", all(1), nil, PatternNone},
		{"anything else", all(6), [][2]int{{0, 3}, {3, 0}, {1, 4}, {4, 2}, {2, 5}, {5, 1}, {0, 5}}, PatternOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.members, tc.edges); got != tc.want {
				t.Fatalf("Classify = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestFitRecoversTheModel times calls exactly by the model and checks
// that the fit finds the constants again: with the reductions timed
// (gamma from them, alpha and beta from the calls), and without (all
// three from calls of two algorithms, whose beta:gamma ratios differ).
func TestFitRecoversTheModel(t *testing.T) {
	const alpha, beta, gamma = 20_000.0, 0.5, 0.25
	sizes := []int64{1 << 10, 1 << 14, 1 << 18, 1 << 20, 1 << 22}
	for _, tc := range []struct {
		name     string
		algos    []string
		reduces  bool
		from     string
		messages int64
	}{
		{"reductions timed", []string{"ring"}, true, "reductions", 5},
		{"two algorithms", []string{"ring", "recursive_doubling"}, false, "calls", 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var evs []trace.Event
			seq := int64(0)
			for _, algo := range tc.algos {
				for _, n := range sizes {
					// messages: transfer time (dur - wait) = 3000 + beta*n
					evs = append(evs, message(trace.KindRecv, 1, 0, "allreduce", algo, seq, 0, 500+3000+int64(beta*float64(n)), n, 500))
					a, b, c, _ := Model("allreduce", algo, 4, float64(n))
					d := int64(a*alpha + b*beta + c*gamma)
					for r := range int32(4) {
						evs = append(evs, coll(r, "allreduce", algo, seq, seq*1e9, d, n))
						if tc.reduces {
							evs = append(evs, trace.Event{Rank: r, Kind: trace.KindReduce, Name: "allreduce", Start: seq*1e9 + 10, Dur: int64(gamma * float64(n)),
								Bytes: n, Peer: -1, Seq: seq, Step: -1, Algo: algo, Root: -1, Chunk: 0, Comm: "world"})
						}
					}
					seq++
				}
			}
			s := Summarize(runOf(4, evs...))
			f := s.Fit
			if f.Messages != tc.messages || math.Abs(f.MsgBetaNSPerB-beta) > 1e-6 || math.Abs(f.MsgAlphaNS-3000) > 1 || f.MsgR2 < 0.999999 {
				t.Fatalf("message fit: %+v", f)
			}
			if !f.Usable || f.GammaFrom != tc.from || math.Abs(f.AlphaNS-alpha)/alpha > 1e-3 || math.Abs(f.BetaNSPerB-beta)/beta > 1e-3 ||
				math.Abs(f.GammaNSPerB-gamma)/gamma > 1e-3 || f.CallR2 < 0.999999 || f.MedianError > 1e-3 || !reflect.DeepEqual(f.RankCounts, []int{4}) {
				t.Fatalf("call fit: %+v", f)
			}
			if math.Abs(f.LinkGBps-2) > 1e-3 {
				t.Fatalf("link %v GB/s, want 2", f.LinkGBps)
			}
			p := s.Project([]int{4, 8}, []string{"ring", "tree"})
			if p == nil || p.Basis != "run" || len(p.Calls) != len(sizes)*len(tc.algos) {
				t.Fatalf("projection: %+v", p)
			}
			// At the run's own size the model reproduces what was measured.
			if math.Abs(p.Modeled-p.Measured)/p.Measured > 1e-3 {
				t.Fatalf("modeled %v, measured %v", p.Modeled, p.Measured)
			}
			var want8 float64
			for range tc.algos {
				for _, n := range sizes {
					want8 += 14*alpha + 2*7.0/8*float64(n)*beta + 7.0/8*float64(n)*gamma
				}
			}
			if math.Abs(p.TimeNS[0][1]-want8)/want8 > 1e-3 {
				t.Fatalf("ring at 8 ranks %v, want %v", p.TimeNS[0][1], want8)
			}
		})
	}
}

// TestFitGates: a fit is shown only with the signal to stand on. Times
// that do not grow with size, times the model cannot explain, and calls
// between hosts whose time does not grow with the bytes that cross each
// give no link bandwidth and no projection, and say why.
func TestFitGates(t *testing.T) {
	sizes := []int64{1 << 10, 1 << 12, 1 << 14, 1 << 16, 1 << 18, 1 << 20}
	calls := func(hosts int, dur func(i int, n int64) int64) *trace.Run {
		var evs []trace.Event
		seq := int64(0)
		for i, n := range sizes {
			for range 3 {
				for r := range int32(4) {
					evs = append(evs, coll(r, "allreduce", "ring", seq, seq*1e9, dur(i, n), n))
				}
				seq++
			}
		}
		run := runOf(4, evs...)
		for r := range 4 {
			run.Manifest.Ranks = append(run.Manifest.Ranks, trace.RankEntry{Rank: r, Host: fmt.Sprintf("h%d", r*hosts/4), CPUs: 8})
		}
		return run
	}
	for _, tc := range []struct {
		name, reason string
		run          *trace.Run
	}{
		{"flat", "do not grow with their size", calls(1, func(i int, n int64) int64 { return 2_000_000 })},
		{"shrinking", "do not grow with their size", calls(1, func(i int, n int64) int64 { return 4_000_000 - int64(i)*500_000 })},
		{"scattered", "explains the calls' times poorly", calls(1, func(i int, n int64) int64 { return []int64{9e6, 2e4, 7e6, 3e4, 8e6, 4e5}[i] })},
		{"two hosts, flat", "beta between hosts <= 0", calls(2, func(i int, n int64) int64 { return 2_000_000 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(tc.run)
			if s.Fit.Usable || !strings.Contains(s.Fit.Reason, tc.reason) || s.Fit.LinkGBps != 0 {
				t.Fatalf("fit: usable %v, link %v GB/s, reason %q; want the reason %q", s.Fit.Usable, s.Fit.LinkGBps, s.Fit.Reason, tc.reason)
			}
			if s.Projection != nil || s.Headline.LinkGBps != 0 {
				t.Fatalf("projection %+v from an unusable fit", s.Projection)
			}
		})
	}
	// The same sizes timed by the model are usable, on one host and two.
	for _, hosts := range []int{1, 2} {
		s := Summarize(calls(hosts, func(i int, n int64) int64 {
			a, b, c, _ := Model("allreduce", "ring", 4, float64(n))
			return int64(a*20_000 + b*0.5 + c*0.25)
		}))
		if !s.Fit.Usable || s.Fit.LinkGBps <= 0 {
			t.Errorf("%d host(s): a fit of calls timed by the model is not usable: %+v", hosts, s.Fit)
		}
	}
}

// TestFitWithoutSignal: calls of one size explain nothing about beta, so
// the fit is not usable, says why, and nothing is projected.
func TestFitWithoutSignal(t *testing.T) {
	var evs []trace.Event
	for seq := range int64(20) {
		for r := range int32(4) {
			evs = append(evs, coll(r, "allreduce", "ring", seq, seq*1e9, 500_000+seq*100, 1<<20))
		}
	}
	s := Summarize(runOf(4, evs...))
	if s.Fit.Usable || !strings.Contains(s.Fit.Reason, "1 size(s)") || !strings.Contains(s.Fit.Reason, "commprof calibrate") || s.Fit.LinkGBps != 0 {
		t.Fatalf("fit: %+v", s.Fit)
	}
	if s.Projection != nil || s.Headline.LinkGBps != 0 {
		t.Fatalf("projection %+v from an unusable fit", s.Projection)
	}
	if !strings.Contains(strings.Join(s.Findings, "\n"), "no alpha-beta-gamma model is shown: the calls have 1 size(s)") {
		t.Fatalf("findings: %q", s.Findings)
	}
}

func TestModelFormulas(t *testing.T) {
	for _, tc := range []struct {
		op, algo string
		p        int
		a, b, c  float64
	}{
		{"allreduce", "ring", 4, 6, 1.5 * 8, 0.75 * 8},
		{"allreduce", "recursive_doubling", 8, 3, 24, 24},
		// 6 ranks fold 2 into 4: one-way sends in and out (half an
		// exchange's beta each) and a reduction, then 2 exchanges.
		{"allreduce", "recursive_doubling", 6, 4, 8 + 16, 8 + 16},
		{"allreduce", "rabenseifner", 8, 6, 2 * 7.0 / 8 * 8, 7},
		{"allreduce", "tree", 4, 4, 16, 16}, // reduce then broadcast, one-way steps
		{"reducescatter", "ring", 4, 3, 6, 6},
		{"allgather", "ring", 4, 3, 6, 0},
		{"broadcast", "tree", 8, 3, 12, 0},
	} {
		a, b, c, ok := Model(tc.op, tc.algo, tc.p, 8)
		if !ok || a != tc.a || b != tc.b || c != tc.c {
			t.Errorf("%s %s p=%d: %v %v %v %v, want %v %v %v", tc.op, tc.algo, tc.p, a, b, c, ok, tc.a, tc.b, tc.c)
		}
	}
	if _, _, _, ok := Model("allreduce", "nosuch", 4, 8); ok {
		t.Error("an unknown algorithm has no model")
	}
}

func TestDiffNormalisesPerStepAndSample(t *testing.T) {
	a := overlapRun()
	a.Manifest.Config["batch_size"] = "32"
	b := overlapRun()
	b.Manifest.Config["batch_size"] = "64"
	// B: the same spans, twice as long.
	for i := range b.Ranks[0].Events {
		e := &b.Ranks[0].Events[i]
		e.Start *= 2
		e.Dur *= 2
	}
	b.Manifest.Metrics = map[string]float64{"test_accuracy": 0.9}
	a.Manifest.Metrics = map[string]float64{"test_accuracy": 0.8}
	d := Compare(Summarize(a), Summarize(b))
	if d.Basis != "step" || !d.PerSample || !reflect.DeepEqual(d.Config, []ConfigChange{{"batch_size", "32", "64"}}) {
		t.Fatalf("diff: basis %s per-sample %v config %+v", d.Basis, d.PerSample, d.Config)
	}
	get := func(metric string) Change {
		for _, c := range append(slices.Clone(d.Outcomes), d.Changes...) {
			if c.Metric == metric {
				return c
			}
		}
		t.Fatalf("no change %q in %+v %+v", metric, d.Outcomes, d.Changes)
		return Change{}
	}
	if d.Title != "batch 32 → 64" || len(d.Outcomes) == 0 || d.Outcomes[0].Metric != "throughput" {
		t.Fatalf("title %q, outcomes %+v", d.Title, d.Outcomes)
	}
	// The batch size changed, so a longer step is no verdict by itself ...
	if c := get("step time"); c.A != 100 || c.B != 200 || *c.Rel != 1 || c.Verdict != "" {
		t.Fatalf("step time: %+v", c)
	}
	// ... but with the same batch it is worse.
	b.Manifest.Config["batch_size"] = "32"
	if c := Compare(Summarize(a), Summarize(b)).Changes; c[0].Metric == "" || !slices.ContainsFunc(c, func(c Change) bool {
		return c.Metric == "step time" && c.Verdict == "worse"
	}) {
		t.Fatalf("same batch: %+v", c)
	}
	// Twice the time for twice the samples: the same time per sample.
	if c := get("time per sample"); c.A != 100.0/32 || c.B != 200.0/64 || *c.Rel != 0 || c.Verdict != "" {
		t.Fatalf("time per sample: %+v", c)
	}
	if c := get("test accuracy"); c.Section != "outcome" || c.Verdict != "better" || math.Abs(*c.Rel-0.125) > 1e-12 {
		t.Fatalf("accuracy: %+v", c)
	}
	if c := get("allreduce time per step"); c.A != 40 || c.B != 80 {
		t.Fatalf("allreduce per step: %+v", c)
	}
	// Compute's effect on the time per sample is counted once, on its
	// per-sample row.
	if ps, pp := get("compute per sample"), get("compute per step"); pp.EffectNS != 0 || ps.EffectNS != ps.B-ps.A {
		t.Fatalf("compute per step's effect %v, per sample's %v", pp.EffectNS, ps.EffectNS)
	}
	checkOrder(t, d.Changes)
}

// checkOrder checks the diff's order: changes that move the time per
// sample first, by how much, then the rest by weighted relative change.
func checkOrder(t *testing.T, cs []Change) {
	t.Helper()
	for i := 1; i < len(cs); i++ {
		p, c := cs[i-1], cs[i]
		ep, ec := math.Abs(p.EffectNS), math.Abs(c.EffectNS)
		if ec > ep || (ec == ep && magnitude(c) > magnitude(p)) {
			t.Fatalf("changes out of order at %d: %+v then %+v", i, p, c)
		}
	}
}

// The whole summary of the hand-built runs, kept as golden JSON so that
// any change of a figure is seen in review.
func TestGoldenSummaries(t *testing.T) {
	for name, run := range map[string]*trace.Run{"late": lateRun(), "overlap": overlapRun(), "ring": ringRun()} {
		t.Run(name, func(t *testing.T) {
			got, err := json.MarshalIndent(Summarize(run), "", " ")
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", name+".json")
			if *update {
				if err := os.WriteFile(path, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(append(got, '\n'), want) {
				t.Fatalf("summary of %s differs from %s; if the change is intended, run go test ./analyze -update and review the diff\n%s", name, path, got)
			}
		})
	}
}

// The summary of a run is the same to the last bit every time, whatever
// order Go iterates the analyzer's maps in: three ranks (means are not
// exact in binary), many steps and many size groups.
func TestSummaryIsDeterministic(t *testing.T) {
	var evs []trace.Event
	for step := range int32(200) {
		for r := range int32(3) {
			t0 := int64(step)*1_000_000 + int64(r)*777
			st := ev(trace.KindStep, r, "step", t0, 900_001+int64(r)*13)
			st.Step = step
			evs = append(evs, st, ev(trace.KindCompute, r, "backward", t0, 500_003+int64(step)*7))
			for k := range int64(24) {
				n := int64(1000)<<k + k*k
				op := []string{"allreduce", "allgather", "reducescatter"}[k%3]
				evs = append(evs, coll(r, op, "ring", int64(step)*24+k, t0+400_000+k*1000+int64(r)*31, 100_000+n/7+int64(r)*k, n))
			}
		}
	}
	run := runOf(3, evs...)
	first, _ := json.Marshal(Summarize(run))
	for i := range 20 {
		b, _ := json.Marshal(Summarize(run))
		if !bytes.Equal(b, first) {
			t.Fatalf("summary %d differs from the first", i+1)
		}
	}
}

// Point-to-point messages (a parameter server's) are communication time
// although no collective contains them.
// A rank's messages to itself (a parameter server's own shard) are
// local copies: counted as local bytes, never as communication time,
// traffic or point-to-point time.
func TestMessagesToItselfAreLocal(t *testing.T) {
	st := ev(trace.KindStep, 0, "step", 0, 100)
	st.Step = 0
	run := runOf(2, st,
		message(trace.KindSend, 0, 0, PointToPoint, "direct", 0, 10, 30, 4000, 0),
		message(trace.KindRecv, 0, 0, PointToPoint, "direct", 0, 10, 30, 4000, 0),
		message(trace.KindRecv, 0, 1, PointToPoint, "direct", 0, 50, 20, 1000, 5),
		message(trace.KindSend, 1, 0, PointToPoint, "direct", 0, 45, 25, 1000, 0))
	s := Summarize(run)
	r := s.Ranks[0]
	if r.CommNS != 20 || r.LocalBytes != 4000 || r.LocalMsgs != 1 || r.BytesRecv != 1000 {
		t.Fatalf("rank 0: comm %d ns, local %d B in %d, received %d B; want 20 ns, 4000 B in 1, 1000 B", r.CommNS, r.LocalBytes, r.LocalMsgs, r.BytesRecv)
	}
	if s.PointToPoint.Messages != 1 || s.PointToPoint.Bytes != 1000 || s.PointToPoint.TimeNS != 20+25 {
		t.Fatalf("point to point: %+v", s.PointToPoint)
	}
	if d := s.Matrix.Dense(); d.Bytes[0][0] != 0 || d.Bytes[1][0] != 1000 {
		t.Fatalf("matrix: %v", s.Matrix)
	}
}

func TestPointToPointIsCommunication(t *testing.T) {
	st := ev(trace.KindStep, 1, "step", 0, 100)
	st.Step = 0
	run := runOf(2, st,
		ev(trace.KindCompute, 1, "backward", 0, 50),
		message(trace.KindSend, 1, 0, PointToPoint, "direct", 0, 40, 20, 1000, 0), // 10 of it under compute
		message(trace.KindRecv, 1, 0, PointToPoint, "direct", 1, 70, 20, 1000, 5))
	s := Summarize(run)
	r := s.Ranks[1]
	if r.CommNS != 40 || r.OverlappedNS != 10 || r.ExposedNS != 30 {
		t.Fatalf("rank 1: %+v", r)
	}
	if len(s.Steps) != 1 || s.Steps[0].ExposedNS != 30 || s.Steps[0].OverlappedNS != 10 || s.Steps[0].IdleNS != 20 {
		t.Fatalf("steps: %+v", s.Steps)
	}
}

// TestDist checks the selected percentiles against a sort, on data with
// many repeats and on sorted and reversed data.
func TestDist(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for trial := range 300 {
		n := 1 + rng.Intn(3000)
		d := make([]int64, n)
		for i := range d {
			switch trial % 4 {
			case 0:
				d[i] = rng.Int63n(10) // many repeats
			case 1:
				d[i] = int64(i) // sorted
			case 2:
				d[i] = int64(n - i) // reversed
			default:
				d[i] = rng.Int63n(1 << 40)
			}
		}
		sorted := slices.Clone(d)
		slices.Sort(sorted)
		at := func(p float64) int64 { return sorted[min(max(int(p*float64(n)+0.999999)-1, 0), n-1)] }
		got := dist(d)
		if got.P50 != at(0.5) || got.P95 != at(0.95) || got.P99 != at(0.99) || got.Max != sorted[n-1] || got.N != int64(n) {
			t.Fatalf("trial %d (n=%d): %+v; sorted gives p50 %d p95 %d p99 %d max %d", trial, n, got, at(0.5), at(0.95), at(0.99), sorted[n-1])
		}
	}
}

// TestDiffOrdersByWeight: a figure's change counts by how much the figure
// weighs in the run. A step 10% slower comes before an idle time that grew
// from 72 ns to 1.9 µs per 8 ms step, before a communication fraction that
// grew from 0.1% to 0.5%, and before a setup broadcast, 0.01% of the
// step, that became three times as slow; the broadcast still counts
// before nothing.
func TestDiffOrdersByWeight(t *testing.T) {
	sum := func(step, idle, frac float64, bcast int64) *Summary {
		ranks := make([]RankStats, 2)
		return &Summary{
			Ranks:       ranks,
			StepSummary: StepSummary{Steps: 100, Time: Dist{Mean: step}, IdleNS: idle, ComputeNS: 6e6},
			Headline:    Headline{CommFraction: frac},
			Ops: []OpStats{
				{Op: "allreduce", Calls: 200, TimeNS: 2 * 100 * 2e6, MeanNS: 2e6},
				{Op: "broadcast", Calls: 2, TimeNS: 2 * bcast, MeanNS: float64(bcast)},
			},
		}
	}
	d := Compare(sum(8e6, 72, 0.001, 80_000), sum(8.8e6, 1890, 0.005, 240_000))
	at := map[string]int{}
	for i, c := range d.Changes {
		at[c.Metric] = i
	}
	for _, m := range []string{"step time", "idle per step", "communication fraction", "broadcast mean time per call"} {
		if _, ok := at[m]; !ok {
			t.Fatalf("no %q among %+v", m, d.Changes)
		}
	}
	if !(at["step time"] < at["idle per step"] && at["step time"] < at["communication fraction"] && at["step time"] < at["broadcast mean time per call"]) {
		t.Errorf("order: step time %d, idle %d, comm fraction %d, broadcast %d", at["step time"], at["idle per step"], at["communication fraction"], at["broadcast mean time per call"])
	}
	if m := magnitude(d.Changes[at["broadcast mean time per call"]]); !(m > 0) {
		t.Errorf("the broadcast's change weighs %v", m)
	}
	checkOrder(t, d.Changes)
}

// Calls whose source does not name the algorithm (an MPI library's own,
// through PMPI or a Horovod timeline) are modelled with the op's standard
// shape, and the projection says so, rather than modelled as free.
func TestProjectionAssumesTheStandardShape(t *testing.T) {
	fit := Fit{Usable: true, AlphaNS: 20_000, BetaNSPerB: 0.5, GammaNSPerB: 0.25}
	calls := []callSize{{Op: "allreduce", Algo: "", Bytes: 1 << 20, PerStep: 1, Measured: 2e6}}
	p := Project(fit, calls, "step", 4, Contention{}, []int{4, 8}, nil)
	ring, _ := fit.Predict("allreduce", "ring", 4, 1<<20)
	if p == nil || p.Modeled <= 0 || math.Abs(p.Modeled-ring) > 1e-6*ring || !strings.Contains(p.Assumed, "ring is assumed") {
		t.Fatalf("projection of calls with no algorithm: %+v; want the ring's %v ns, said", p, ring)
	}
}

// A fit with calls within a host keeps its own beta there, even 0; only a
// fit that saw no steps within a host lends them the cost between hosts.
func TestBetaWithinAHost(t *testing.T) {
	f := Fit{BetaNSPerB: 0, BetaNetNSPerB: 20, WithinHost: true}
	if b := f.betaAt(1 << 20); b != 0 {
		t.Errorf("fitted within a host: beta %v, want its own 0", b)
	}
	f.WithinHost = false
	if b := f.betaAt(1 << 20); b != 20 {
		t.Errorf("nothing within a host: beta %v, want the network's 20", b)
	}
}

// Ranks late by a staircase of amounts (a loaded machine's noise, each
// rank a little later than the next) are measured one after the other
// against fewer and fewer: at most half of them are named, as slowness
// shared by most ranks is the typical pace.
func TestStragglersAtMostHalf(t *testing.T) {
	late := []int64{2_400_000, 2_000_000, 1_600_000, 1_200_000, 800_000, 400_000, 0, 0}
	var evs []trace.Event
	for i := range int64(8) {
		t0 := i * 6_000_000
		for r := range int32(len(late)) {
			evs = append(evs, coll(r, "allreduce", "ring", i, t0+late[r], 2_600_000-late[r], 4096))
		}
	}
	st := Summarize(runOf(len(late), evs...)).Stragglers
	if len(st.Named) == 0 || len(st.Named) > len(late)/2 || st.Named[0] != 0 {
		t.Fatalf("named %v, want rank 0 first and at most %d: %+v", st.Named, len(late)/2, st.Ranks)
	}
}

// The model's busbw curve is busbw as nccl-tests defines it: on a ring
// with no latency and no reduction cost, allreduce's busbw is the link's
// bandwidth (1/beta) at every size, on any number of ranks; a latency
// only lowers it, most at the smallest sizes (the model's ring sends
// large buffers in segments, so the latency's share levels off, never
// rises).
func TestBusBWCurveIsTheLinkOnAnIdealRing(t *testing.T) {
	for _, p := range []int{2, 4, 16} {
		f := Fit{BetaNSPerB: 0.1, WithinHost: true} // 10 GB/s
		pts := f.BusBWCurve("allreduce", "ring", p, 64<<20)
		if len(pts) == 0 || pts[len(pts)-1].Bytes < 64<<20 || pts[0].Bytes != 8 {
			t.Fatalf("p=%d: curve %v", p, pts)
		}
		for _, pt := range pts {
			// A ring splits the buffer into p chunks: sizes below p
			// bytes are fractional chunks, still exact in the model.
			if math.Abs(pt.GBps-10) > 1e-9 {
				t.Errorf("p=%d, %d bytes: busbw %v GB/s, want 10", p, pt.Bytes, pt.GBps)
			}
		}
		f.AlphaNS = 1000
		lat := f.BusBWCurve("allreduce", "ring", p, 64<<20)
		if len(lat) != len(pts) {
			t.Fatalf("p=%d: %d points with latency, %d without", p, len(lat), len(pts))
		}
		for i := 1; i < len(lat); i++ {
			if lat[i].GBps >= 10 || lat[i].GBps < lat[i-1].GBps-1e-12 {
				t.Errorf("p=%d: with latency busbw %v at %d bytes after %v: want not falling, below the link", p, lat[i].GBps, lat[i].Bytes, lat[i-1].GBps)
			}
		}
	}
}
