package analyze

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/commprof/commprof/trace"
)

// mixedRun exercises every mark a call can carry as it is merged: two
// communicators (one of two ranks), labels, steps, a timed region, calls
// the program waited on, message waits, point-to-point messages, and one
// rank's events written out of order.
func mixedRun(iters int) *trace.Run {
	rng := rand.New(rand.NewPCG(3, 9))
	var evs []trace.Event
	for r := range int32(3) {
		var mine []trace.Event
		timed := ev(trace.KindMark, r, trace.MarkTimed, 5*10_000, 0)
		timed.Value = 1
		untimed := ev(trace.KindMark, r, trace.MarkTimed, int64(iters-5)*10_000, 0)
		mine = append(mine, timed, untimed)
		for i := range int64(iters) {
			t0 := i*10_000 + int64(r)*37 + rng.Int64N(500)
			mine = append(mine, ev(trace.KindCompute, r, "forward", t0, 1500))
			c := coll(r, "allreduce", "ring", i, t0+2000, 3000+int64(r)*11+rng.Int64N(400), 4096<<(i%3))
			if i%2 == 0 {
				c.Label = fmt.Sprintf("grad.%d", i%4)
			}
			mine = append(mine, c)
			if i%5 == 0 {
				mine = append(mine, waitFor(c, c.Start+c.Dur/2))
			}
			if r < 2 {
				b := coll(r, "broadcast", "tree", i, t0+6000+rng.Int64N(100), 800, 512)
				b.Comm, b.Root = "pair", 0
				mine = append(mine, b)
			}
			if r != 1 {
				peer := 2 - r
				mine = append(mine, message(trace.KindSend, r, peer, PointToPoint, "direct", i, t0+7500, 300, 128, 0),
					message(trace.KindRecv, r, peer, PointToPoint, "direct", i, t0+7600, 400, 128, 50))
			}
			if i%10 == 0 {
				st := ev(trace.KindStep, r, "step", t0, 99_000)
				st.Step = int32(i / 10)
				mine = append(mine, st)
			}
		}
		if r == 2 {
			// Every 7th allreduce's event written after the next one's.
			var at []int
			for k, e := range mine {
				if e.Kind == trace.KindCollective && e.Seq%7 == 0 {
					at = append(at, k)
				}
			}
			for _, k := range at {
				for j := k + 1; j < len(mine); j++ {
					if mine[j].Kind == trace.KindCollective && mine[j].Comm == "world" {
						mine[k], mine[j] = mine[j], mine[k]
						break
					}
				}
			}
		}
		evs = append(evs, mine...)
	}
	return runOf(3, evs...)
}

// TestCallChunksDoNotChangeTheSummary: each analysis reads the run's
// calls merged a chunk of instances at a time; whatever the chunk, the
// summary is the same to the last bit as with the whole run in one.
func TestCallChunksDoNotChangeTheSummary(t *testing.T) {
	runs := map[string]*trace.Run{
		"mixed":    mixedRun(120),
		"late":     lateRun(),
		"overlap":  overlapRun(),
		"ring":     ringRun(),
		"halo":     halo{ranks: 4, iters: 60, slow: 2, stall: 3000, coll: 1}.run(),
		"halo2d":   halo2D(3, 2, 30, 4, 5000),
		"pingpong": pingPong(40, 2000, true),
	}
	for name, run := range runs {
		t.Run(name, func(t *testing.T) {
			whole := summarizeChunked(run, 0, 1<<30, 0)
			want, err := json.Marshal(whole)
			if err != nil {
				t.Fatal(err)
			}
			for _, chunk := range []int{1, 2, 5, 64} {
				// Each analysis its own passes, and passes shared by the
				// analyses that ask at once (rides).
				for _, share := range []int{1 << 62, 1} {
					s := fed(run, 0, chunk, 0)
					s.shareCalls = share
					got, _ := json.Marshal(s.Finalize())
					if !bytes.Equal(got, want) {
						t.Errorf("chunks of %d calls, shared from %d calls: the summary differs from the whole run's:\n%s\nwant\n%s", chunk, share, got, want)
					}
				}
			}

		})
	}
	// Every full chunk of the packed logs spilled to a file: a run long
	// enough to fill chunks.
	long := mixedRun(3000)
	want, _ := json.Marshal(summarizeChunked(long, 0, 0, 0))
	s := fed(long, 0, 0, 1)
	got, _ := json.Marshal(s.Finalize())
	if s.spill.size == 0 || s.spill.f != nil {
		t.Fatalf("%d bytes spilled (file still open: %v)", s.spill.size, s.spill.f != nil)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("calls spilled: the summary differs from the one held in memory")
	}
	// The mixed run shows what it is built to: the pair's broadcasts, a
	// labelled call's skew and the calls outside the timed region left out.
	sum := Summarize(mixedRun(120))
	var bcast, allred int64
	for _, c := range sum.Collectives {
		switch c.Op {
		case "broadcast":
			bcast += c.Calls
		case "allreduce":
			allred += c.Calls
		}
	}
	if bcast != 110 || allred != 110 {
		t.Errorf("%d broadcasts and %d allreduces timed, want 110 of each (10 of 120 outside the timed region)", bcast, allred)
	}
	if len(sum.Skew.ByLabel) != 2 {
		t.Errorf("%d labels with skew, want grad.0 and grad.2", len(sum.Skew.ByLabel))
	}
}

// TestDistAccIsExact: a distribution gathered in two passes, past the
// values it keeps as they are, has the percentiles of every value's.
func TestDistAccIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 1))
	gens := map[string]func() int64{
		"wide":     func() int64 { return rng.Int64N(1 << 40) },
		"tight":    func() int64 { return 20_000 + rng.Int64N(7) },
		"equal":    func() int64 { return 777 },
		"signed":   func() int64 { return rng.Int64N(2000) - 1000 },
		"small":    func() int64 { return rng.Int64N(70) },
		"huge":     func() int64 { return 1<<62 + rng.Int64N(1<<40) },
		"lognorm":  func() int64 { return int64(1000 * (1 + rng.ExpFloat64()*rng.ExpFloat64())) },
		"two-mode": func() int64 { return []int64{5_000, 900_000}[rng.IntN(2)] + rng.Int64N(30) },
	}
	for name, gen := range gens {
		for _, n := range []int{1, 2, distExact, distExact + 1, 3 * distExact, 100_000} {
			vals := make([]int64, n)
			var a distAcc
			for i := range vals {
				vals[i] = gen()
				a.add(vals[i])
			}
			if a.needsSecond() {
				if n <= distExact {
					t.Fatalf("%s, %d values: a second pass asked for though all were kept", name, n)
				}
				for _, v := range vals {
					a.addSecond(v)
				}
			} else if n > distExact {
				t.Fatalf("%s, %d values: no second pass asked for", name, n)
			}
			kept := 0
			for _, p := range a.picked {
				kept += len(p)
			}
			if want, got := dist(slices.Clone(vals)), a.dist(); got != want {
				t.Errorf("%s, %d values: %+v, want %+v", name, n, got, want)
			}
			if name == "wide" && n == 100_000 && kept > n/10 {
				t.Errorf("wide, %d values: the second pass kept %d of them", n, kept)
			}
		}
	}
}

// TestLargeGroupsKeepExactPercentiles: a group of more calls than a
// distribution keeps as they are gets the percentiles of all its
// durations and skews, and its label the percentiles of its skews, as
// computed here from the events.
func TestLargeGroupsKeepExactPercentiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	const calls = 5000 // 15,000 durations, 5,000 skews: past distAcc's 4,096, two passes
	var evs []trace.Event
	var durs, skews []int64
	for i := range int64(calls) {
		first, last := int64(1<<62), int64(0)
		for r := range int32(3) {
			start := i*100_000 + rng.Int64N(5000)
			dur := 20_000 + rng.Int64N(3000)
			if rng.IntN(50) == 0 {
				dur *= 10
			}
			c := coll(r, "allreduce", "ring", i, start, dur, 1<<20)
			c.Label = "grads"
			evs = append(evs, c)
			durs = append(durs, dur)
			first, last = min(first, start), max(last, start)
		}
		skews = append(skews, last-first)
	}
	sum := Summarize(runOf(3, evs...))
	if len(sum.Collectives) != 1 {
		t.Fatalf("%d groups, want 1", len(sum.Collectives))
	}
	if got, want := sum.Collectives[0].Time, dist(durs); got != want {
		t.Errorf("durations: %+v, want %+v", got, want)
	}
	if got, want := sum.Skew.Dist, dist(skews); got != want {
		t.Errorf("skew: %+v, want %+v", got, want)
	}
	if len(sum.Skew.ByLabel) != 1 || sum.Skew.ByLabel[0].Dist != dist(skews) {
		t.Errorf("skew by label: %+v, want one label of %+v", sum.Skew.ByLabel, dist(skews))
	}
}

// TestCommunicatorOrderIsTheNames: ranks read in parallel intern the
// communicators' names in any order; a group's calls on two of them are
// in the same order however the names were interned, and so is every
// figure computed over them in order (the calls' spread over blocks).
func TestCommunicatorOrderIsTheNames(t *testing.T) {
	var evs []trace.Event
	for r := range int32(2) {
		comms := []string{"y", "x"}
		if r == 1 {
			comms = []string{"x", "y"}
		}
		for k, comm := range comms {
			for i := range int64(40) {
				c := coll(r, "allreduce", "ring", i, int64(k)*1_000_000+i*10_000, 1000+int64(k)*500+i*i, 4096)
				c.Comm = comm
				evs = append(evs, c)
			}
		}
	}
	run := runOf(2, evs...)
	want, _ := json.Marshal(Summarize(run))
	slices.Reverse(run.Ranks) // rank 1 read first: "x" interned first
	got, _ := json.Marshal(Summarize(run))
	if !bytes.Equal(got, want) {
		t.Errorf("the summary depends on which rank was read first:\n%s\nwant\n%s", got, want)
	}
}

// TestStepsSumTheCallsThatStartInThem: a step's bytes are those of the
// calls that started in it, steps overlapping or not, a call on a step's
// start counted in it and one on its end not.
func TestStepsSumTheCallsThatStartInThem(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	var evs []trace.Event
	type key struct{ rank, step int32 }
	want := map[key]int64{}
	var steps [2][]trace.Event
	for r := range int32(2) {
		for k := range int32(30) {
			// Every third overlaps the next, every fifth the next three.
			st := ev(trace.KindStep, r, "step", int64(k)*1000, 1000+int64(k%3)*400)
			if k%5 == 0 {
				st.Dur = 3500
			}
			st.Step = k
			steps[r] = append(steps[r], st)
			evs = append(evs, st)
		}
	}
	for i := range int64(200) {
		start := rng.Int64N(32_000)
		if i%10 == 0 {
			start = (i / 10) * 1000 // on a step's start, and the one before's end
		}
		for r := range int32(2) {
			b := 1 + rng.Int64N(1000)
			evs = append(evs, coll(r, "allreduce", "ring", i, start, 50, b))
			for _, st := range steps[r] {
				if st.Start <= start && start < st.End() {
					want[key{r, st.Step}] += b
				}
			}
		}
	}
	sum := Summarize(runOf(2, evs...))
	if len(sum.Steps) != 30 {
		t.Fatalf("%d steps, want 30", len(sum.Steps))
	}
	for _, st := range sum.Steps {
		w := float64(want[key{0, int32(st.Step)}]+want[key{1, int32(st.Step)}]) / 2
		if st.CommBytes != w {
			t.Errorf("step %d: %g bytes, want %g", st.Step, st.CommBytes, w)
		}
	}
}

// TestReplaySampleDescribe: a small share keeps two significant digits
// and the stretch's bounds the digits that tell them apart.
func TestReplaySampleDescribe(t *testing.T) {
	for _, tc := range []struct {
		ops, total, from, to int64
		share, a, b          string
	}{
		{262_144, 100_004_004, 256_600_000_000, 257_420_000_000, "0.26%", "256.6 s", "257.4 s"},
		{262_144, 1_004_004_004, 256_600_000_000, 256_640_000_000, "0.026%", "256.60 s", "256.64 s"},
		{262_144, 6_400_060, 34_600_000_000, 37_000_000_000, "4%", "34.6 s", "37 s"},
		{262_144, 320_000, 1_000_000, 9_000_000, "82%", "1 ms", "9 ms"},
	} {
		sm := &ReplaySample{FromNS: 5 + tc.from, ToNS: 5 + tc.to, Ops: tc.ops, TotalOps: tc.total}
		share, a, b := sm.Describe(5)
		if share != tc.share || a != tc.a || b != tc.b {
			t.Errorf("%d of %d ops, %d to %d ns: %q, %q to %q; want %q, %q to %q", tc.ops, tc.total, tc.from, tc.to, share, a, b, tc.share, tc.a, tc.b)
		}
	}
}
