package analyze

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/commprof/commprof/trace"
)

// halo is a halo exchange as the PMPI library records it: on each of
// ranks ranks, iters iterations of 1 ms of work (with a little jitter),
// an Irecv from each neighbour, an Isend to each, and a Waitall (a wait
// event per request, every one from the Waitall's start to its end, and
// each message's event from its post to that end). Messages take 10 µs;
// a Waitall returns 1 µs after its last message arrived.
type halo struct {
	ranks, iters int
	// slow sleeps stall more before the exchange of the iterations in
	// stalls (of every iteration, if stalls is nil); -1: nobody.
	slow   int
	stall  int64
	stalls []int
	// polled: rank 0 tests its requests from the moment it posted its
	// receives (its wait events start before its sends' posts), as a
	// program that polls with MPI_Test does.
	polled bool
	// coll adds an Iallreduce posted with the receives: 1 waited for with
	// MPI_Wait after the Waitall, 2 completed in the messages' Waitall.
	coll int
}

func (h halo) run() *trace.Run {
	const us = int64(1000)
	var evs []trace.Event
	release := make([]int64, h.ranks) // when each rank's last wait returned
	for it := range h.iters {
		post := make([]int64, h.ranks)
		last := int64(0)
		for r := range h.ranks {
			post[r] = release[r] + 1000*us + int64((r*7+it*13)%5)*us
			if r == h.slow && (h.stalls == nil || slices.Contains(h.stalls, it)) {
				post[r] += h.stall
			}
			last = max(last, post[r])
		}
		collDone := last + 20*us
		for r := range h.ranks {
			left, right := (r+h.ranks-1)%h.ranks, (r+1)%h.ranks
			sendAt, waitAt := post[r]+us, post[r]+2*us
			p2pEnd := max(waitAt, max(post[left], post[right])+us+10*us) + us
			end := p2pEnd
			switch h.coll {
			case 1:
				end = max(p2pEnd+us, collDone) + us
				c := coll(int32(r), "allreduce", "", int64(it), post[r], end-post[r], 8)
				evs = append(evs, c, waitFor(c, p2pEnd+us))
			case 2:
				end = max(p2pEnd, collDone) + us
				p2pEnd = end
				c := coll(int32(r), "allreduce", "", int64(it), post[r], end-post[r], 8)
				evs = append(evs, c, waitFor(c, waitAt))
			}
			if h.polled && r == 0 {
				waitAt = post[r]
			}
			for _, m := range []trace.Event{
				message(trace.KindRecv, int32(r), int32(left), PointToPoint, "", 1, post[r], p2pEnd-post[r], 64, 0),
				message(trace.KindRecv, int32(r), int32(right), PointToPoint, "", 2, post[r], p2pEnd-post[r], 64, 0),
				message(trace.KindSend, int32(r), int32(left), PointToPoint, "", 2, sendAt, p2pEnd-sendAt, 64, 0),
				message(trace.KindSend, int32(r), int32(right), PointToPoint, "", 1, sendAt, p2pEnd-sendAt, 64, 0),
			} {
				evs = append(evs, m, waitFor(m, waitAt))
			}
			release[r] = end
		}
	}
	return runOf(h.ranks, evs...)
}

// TestReplayFollowsAHaloExchange: a halo exchange of non-blocking sends
// and receives completed by Waitall is replayed as one program (it used
// to make the replay give up and judge calls one by one), reproduces
// itself exactly, and names the rank that slept 10 ms before two of 40
// exchanges, at what that cost the job (20 ms, every rank waiting for its
// messages), in its own work. A rank that polled its requests is
// replayed too.
func TestReplayFollowsAHaloExchange(t *testing.T) {
	for _, polled := range []bool{false, true} {
		st := Summarize(halo{ranks: 4, iters: 40, slow: 2, stall: 10_000_000, stalls: []int{10, 30}, polled: polled}.run()).Stragglers
		if st.Reason != "" || !st.SplitKnown || st.ReplayErrorNS != 0 {
			t.Fatalf("polled %v: reason %q, split known %v, replay error %d ns", polled, st.Reason, st.SplitKnown, st.ReplayErrorNS)
		}
		if st.Windows != 40 || st.Basis != "call" {
			t.Errorf("polled %v: %d windows (%s), want the 40 Waitalls", polled, st.Windows, st.Basis)
		}
		if !slices.Equal(st.Named, []int{2}) {
			t.Fatalf("polled %v: named %v, want [2]: %+v", polled, st.Named, st.Ranks)
		}
		rc := st.Ranks[0]
		if rc.Rank != 2 || math.Abs(float64(rc.CostNS)-20e6) > 0.5e6 || rc.WorkNS < rc.CostNS*9/10 {
			t.Errorf("polled %v: rank %d costs %d ns (want 20 ms), %d ns of it in its own work", polled, rc.Rank, rc.CostNS, rc.WorkNS)
		}
	}
}

// TestCleanHaloExchangeNamesNobody: the same exchange with no stall, only
// its jitter, names nobody, and says the noise it measured.
func TestCleanHaloExchangeNamesNobody(t *testing.T) {
	st := Summarize(halo{ranks: 4, iters: 40, slow: -1}.run()).Stragglers
	if len(st.Named) != 0 || st.NoiseBoundNS < 0 || st.Confidence != nameConfidence {
		t.Fatalf("named %v, noise bound %d ns at %v: %+v", st.Named, st.NoiseBoundNS, st.Confidence, st.Ranks)
	}
}

// TestAShortRunGetsNoVerdict: three exchanges say nothing of the run's
// noise, and the stragglers say so rather than name anybody.
func TestAShortRunGetsNoVerdict(t *testing.T) {
	st := Summarize(halo{ranks: 4, iters: 3, slow: 1, stall: 10_000_000, stalls: []int{1}}.run()).Stragglers
	if len(st.Named) != 0 || st.Undecided == "" || st.NoiseBoundNS != -1 {
		t.Fatalf("named %v, undecided %q, bound %d", st.Named, st.Undecided, st.NoiseBoundNS)
	}
}

// TestOneLongStallIsNamed: a rank that slept 200 ms once, in a run whose
// other ranks' windows never cost more than a few µs, is named at about
// those 200 ms: a single long stall is a real cost.
func TestOneLongStallIsNamed(t *testing.T) {
	st := Summarize(halo{ranks: 4, iters: 40, slow: 1, stall: 200_000_000, stalls: []int{20}}.run()).Stragglers
	if !slices.Equal(st.Named, []int{1}) || math.Abs(float64(st.Ranks[0].CostNS)-200e6) > 2e6 {
		t.Fatalf("named %v: %+v", st.Named, st.Ranks)
	}
}

// TestFallbackIsHonest: messages that cannot have happened as recorded
// (each of two ranks received from the other before either sent: a stream
// whose clock is off, or calls the library could not see) cannot be
// replayed; each call is judged on its own, "% of the run" is of the
// run's wall time, and the split of a cost into work and transfers is said
// to be unknown, not 0.
func TestFallbackIsHonest(t *testing.T) {
	const ms = int64(1_000_000)
	evs := []trace.Event{
		message(trace.KindRecv, 0, 1, PointToPoint, "", 0, 0, ms, 64, 0),
		message(trace.KindRecv, 1, 0, PointToPoint, "", 0, 0, ms, 64, 0),
		message(trace.KindSend, 0, 1, PointToPoint, "", 0, 2*ms, ms/100, 64, 0),
		message(trace.KindSend, 1, 0, PointToPoint, "", 0, 2*ms, ms/100, 64, 0),
	}
	for i := range int64(8) {
		t0 := 10*ms + i*10*ms
		evs = append(evs, coll(0, "allreduce", "ring", i, t0, ms, 64), coll(1, "allreduce", "ring", i, t0, ms, 64),
			coll(2, "allreduce", "ring", i, t0+ms/2, ms/2, 64))
	}
	st := Summarize(runOf(3, evs...)).Stragglers
	if st.Reason == "" || st.SplitKnown {
		t.Fatalf("reason %q, split known %v: the run should not replay", st.Reason, st.SplitKnown)
	}
	if st.TotalNS != 71*ms {
		t.Errorf("total %d ns, want the calls' wall time 71 ms", st.TotalNS)
	}
	for _, rc := range st.Ranks {
		if want := float64(rc.CostNS) / float64(71*ms); math.Abs(rc.Share-want) > 1e-9 {
			t.Errorf("rank %d: share %v, want its cost over the wall time %v", rc.Rank, rc.Share, want)
		}
	}
	if !slices.Equal(st.Named, []int{2}) {
		t.Errorf("named %v, want rank 2, 0.5 ms late at each of 8 calls: %+v", st.Named, st.Ranks)
	}
}

// TestNoiseBound: the bound is seeded (one pool, one answer), grows with
// the number of ranks compared, is 0 for a pool of zeros, and the normal
// approximation used for long runs agrees with the bootstrap.
func TestNoiseBound(t *testing.T) {
	var pool []int64
	for i := range 300 {
		pool = append(pool, int64((i*7919)%1000)) // spread 0..999, mean about 500
	}
	a, b := noiseBound(pool, 50, 4, 0.99), noiseBound(pool, 50, 4, 0.99)
	if a != b {
		t.Fatalf("bound %d then %d for one pool", a, b)
	}
	if few, many := noiseBound(pool, 50, 2, 0.99), noiseBound(pool, 50, 16, 0.99); !(few < a && a < many) {
		t.Errorf("bounds for 2, 4, 16 ranks: %d, %d, %d; want increasing", few, a, many)
	}
	if a <= 50*500 || a > 50*700 {
		t.Errorf("bound %d for 50 windows of mean ~500: want a little above 25000", a)
	}
	if z := noiseBound(make([]int64, 40), 20, 4, 0.99); z != 0 {
		t.Errorf("bound of a pool of zeros %d", z)
	}
	boot, normal := bootBound(pool, 50, 4, 0.99, 2000), normalBound(pool, 50, 4, 0.99)
	if math.Abs(float64(boot-normal)) > 0.05*float64(boot) {
		t.Errorf("bootstrap %d, normal approximation %d: more than 5%% apart", boot, normal)
	}
}

func stepEv(rank int32, step int32, start, dur int64) trace.Event {
	e := ev(trace.KindStep, rank, "step", start, dur)
	e.Step = step
	return e
}

// pingPong: pairs (0,1),(2,3); even rank sends (blocking, sync if ssend)
// to odd, odd replies. Rank 1 stalls `stall` before each receive.
func pingPong(iters int, stall int64, ssend bool) *trace.Run {
	const us = int64(1000)
	var evs []trace.Event
	cur := make([]int64, 4)
	for it := range iters {
		for p := 0; p < 4; p += 2 {
			s, r := int32(p), int32(p+1)
			Ps := cur[s] + 1000*us
			Pr := cur[r] + 1000*us
			if r == 1 {
				Pr += stall
			}
			var E1, sendEnd int64
			E1 = max(Ps, Pr) + 10*us
			sendEnd = E1
			if !ssend {
				sendEnd = Ps + 5*us
				E1 = max(Ps+10*us, Pr+1*us)
			}
			evs = append(evs, message(trace.KindSend, s, r, PointToPoint, "", 0, Ps, sendEnd-Ps, 64, 0),
				message(trace.KindRecv, r, s, PointToPoint, "", 0, Pr, E1-Pr, 64, 0))
			Qr := E1 + 500*us
			Qs := sendEnd + us
			E2 := max(Qs, Qr) + 10*us
			send2End := E2
			if !ssend {
				send2End = Qr + 5*us
				E2 = max(Qr+10*us, Qs+us)
			}
			evs = append(evs, message(trace.KindSend, r, s, PointToPoint, "", 1, Qr, send2End-Qr, 64, 0),
				message(trace.KindRecv, s, r, PointToPoint, "", 1, Qs, E2-Qs, 64, 0))
			evs = append(evs, stepEv(s, int32(it), cur[s], E2-cur[s]), stepEv(r, int32(it), cur[r], send2End-cur[r]))
			cur[s], cur[r] = E2, send2End
		}
	}
	return runOf(4, evs...)
}

// halo2D: non-periodic nx*ny grid, one tag, Waitall, no collectives.
func halo2D(nx, ny, iters, slow int, stall int64) *trace.Run {
	const us = int64(1000)
	ranks := nx * ny
	var evs []trace.Event
	release := make([]int64, ranks)
	nbs := func(r int) []int {
		x, y := r%nx, r/nx
		var nb []int
		if x > 0 {
			nb = append(nb, r-1)
		}
		if x < nx-1 {
			nb = append(nb, r+1)
		}
		if y > 0 {
			nb = append(nb, r-nx)
		}
		if y < ny-1 {
			nb = append(nb, r+nx)
		}
		return nb
	}
	for it := range iters {
		post := make([]int64, ranks)
		for r := range ranks {
			post[r] = release[r] + 1000*us + int64((r*7+it*13)%5)*us
			if r == slow {
				post[r] += stall
			}
		}
		for r := range ranks {
			nb := nbs(r)
			sendAt := post[r] + us
			waitAt := post[r] + 2*us
			arrive := int64(0)
			for _, p := range nb {
				arrive = max(arrive, post[p]+us+10*us)
			}
			end := max(waitAt, arrive) + us
			var msgs []trace.Event
			for _, p := range nb {
				msgs = append(msgs, message(trace.KindRecv, int32(r), int32(p), PointToPoint, "", 0, post[r], end-post[r], 64, 0))
			}
			for _, p := range nb {
				msgs = append(msgs, message(trace.KindSend, int32(r), int32(p), PointToPoint, "", 0, sendAt, end-sendAt, 64, 0))
			}
			for _, m := range msgs {
				evs = append(evs, m, waitFor(m, waitAt))
			}
			release[r] = end
		}
	}
	return runOf(ranks, evs...)
}

// TestReviewedCases: cases a review of the replay found costing a real
// straggler nothing. A receiver late for synchronous sends (the send
// lasts until the receive is posted, which is not the message's time in
// flight); an Iallreduce completed in the same Waitall as a halo
// exchange's messages (one completion call, not a wait for the messages
// and then a polled one); a non-periodic 6x6 grid exchanging on one tag
// (edge ranks have fewer neighbours, so the k-th receive is not the same
// iteration's on every rank). Each names its slow rank at what it slept.
func TestReviewedCases(t *testing.T) {
	for _, tc := range []struct {
		name      string
		run       *trace.Run
		slow      int
		cost, tol float64
	}{
		{"eager sends", pingPong(20, 5_000_000, false), 1, 100e6, 0.02},
		{"synchronous sends", pingPong(20, 5_000_000, true), 1, 100e6, 0.02},
		{"collective in its own wait", halo{ranks: 8, iters: 20, slow: 4, stall: 5_000_000, coll: 1}.run(), 4, 95e6, 0.05},
		{"collective in the messages' Waitall", halo{ranks: 8, iters: 20, slow: 4, stall: 5_000_000, coll: 2}.run(), 4, 95e6, 0.05},
		{"non-periodic grid, one tag", halo2D(6, 6, 40, 14, 150_000), 14, 6e6, 0.1},
	} {
		st := Summarize(tc.run).Stragglers
		if st.Reason != "" || st.ReplayErrorNS != 0 {
			t.Errorf("%s: reason %q, replay error %d", tc.name, st.Reason, st.ReplayErrorNS)
			continue
		}
		if !slices.Equal(st.Named, []int{tc.slow}) || math.Abs(float64(st.Ranks[0].CostNS)-tc.cost) > tc.tol*tc.cost {
			t.Errorf("%s: named %v (want [%d] at %.0f ns), costliest %+v", tc.name, st.Named, tc.slow, tc.cost, st.Ranks[0])
		}
	}
	if st := Summarize(halo2D(6, 6, 40, -1, 0)).Stragglers; len(st.Named) != 0 || st.Windows != 40 {
		t.Errorf("the clean grid: named %v over %d windows (want nobody over the 40 exchanges)", st.Named, st.Windows)
	}
}

// BenchmarkStragglersWide replays 50 allreduces over 512 ranks, one of
// them late: a member's completion must not cost a look at every other
// member (docs/benchmarks.md, "Reading a run and stats").
func BenchmarkStragglersWide(b *testing.B) {
	const ranks, calls = 512, 50
	var evs []trace.Event
	for i := range int64(calls) {
		for r := range int32(ranks) {
			late := int64(0)
			if r == 7 {
				late = 200_000
			}
			evs = append(evs, coll(r, "allreduce", "ring", i, i*1_000_000+late+int64(r%5)*1000, 300_000-late, 4096))
		}
	}
	run := runOf(ranks, evs...)
	b.ResetTimer()
	for range b.N {
		if st := Summarize(run).Stragglers; !slices.Equal(st.Named, []int{7}) {
			b.Fatalf("named %v", st.Named)
		}
	}
}

// TestCriticalPathIsOfTheSlowestStep: the critical path is drawn for the
// step the steps table calls slowest (the longest mean over the ranks),
// not the one that ended longest after the step before it: here step 1
// ends 40 ms after step 0 but lasts 10, and step 2 lasts 20.
func TestCriticalPathIsOfTheSlowestStep(t *testing.T) {
	const ms = int64(1_000_000)
	spans := [][2]int64{{0, 10}, {40, 50}, {60, 80}, {90, 100}}
	var evs []trace.Event
	for r := range int32(2) {
		for k, sp := range spans {
			evs = append(evs, stepEv(r, int32(k), sp[0]*ms, (sp[1]-sp[0])*ms),
				coll(r, "allreduce", "ring", int64(k), sp[0]*ms+ms, (sp[1]-sp[0]-2)*ms, 64))
		}
	}
	s := Summarize(runOf(2, evs...))
	slowest := slices.MaxFunc(s.Steps, func(a, b StepStats) int { return cmp.Compare(a.TimeNS, b.TimeNS) })
	cp := s.Stragglers.CriticalPath
	if cp == nil || slowest.Step != 2 || cp.Window != slowest.Step {
		t.Fatalf("critical path %+v; the steps table's slowest is step %d", cp, slowest.Step)
	}
	if cp.StartNS != 60*ms || cp.EndNS != 80*ms {
		t.Errorf("the path runs %d-%d ns, want the step's 60-80 ms", cp.StartNS, cp.EndNS)
	}
}

// TestReplayWindow: a run with more operations than the replay's budget
// is replayed over the stretch in its middle that holds about that many,
// and the verdict there is the whole run's: a rank that stalls 5 ms at
// every tenth exchange of 400 is named at 5 ms a tenth of the exchanges
// replayed, and a clean run names nobody.
func TestReplayWindow(t *testing.T) {
	var stalls []int
	for it := 0; it < 400; it += 10 {
		stalls = append(stalls, it)
	}
	run := halo{ranks: 4, iters: 400, slow: 2, stall: 5_000_000, stalls: stalls}.run()
	whole := Summarize(run).Stragglers
	if whole.Sample != nil || whole.Windows != 400 || !slices.Equal(whole.Named, []int{2}) {
		t.Fatalf("whole run: sample %+v, %d windows, named %v", whole.Sample, whole.Windows, whole.Named)
	}
	// Each exchange is 4 messages and 4 waits on each of 4 ranks.
	const budget = 3200
	st := summarizeReplaying(run, budget).Stragglers
	sm := st.Sample
	if sm == nil || sm.TotalOps != 400*4*8 || sm.Ops > budget || sm.Ops < budget*3/4 {
		t.Fatalf("sample %+v, want at most %d of %d operations, and most of that", sm, budget, 400*4*8)
	}
	if st.Windows < 70 || st.Windows > 100 || st.ReplayErrorNS != 0 {
		t.Fatalf("%d windows replayed (want about %d), replay error %d ns", st.Windows, budget/32, st.ReplayErrorNS)
	}
	if mid := (sm.FromNS + sm.ToNS) / 2; mid < run.Ranks[0].Events[len(run.Ranks[0].Events)*2/5].Start ||
		mid > run.Ranks[0].Events[len(run.Ranks[0].Events)*3/5].Start {
		t.Errorf("stretch %d..%d ns is not in the run's middle", sm.FromNS, sm.ToNS)
	}
	if !slices.Equal(st.Named, []int{2}) {
		t.Fatalf("named %v in the stretch: %+v", st.Named, st.Ranks)
	}
	want := float64(5e6) * float64(st.Windows) / 10
	if got := float64(st.Ranks[0].CostNS); math.Abs(got-want) > 0.15*want {
		t.Errorf("rank 2 costs %.1f ms in the stretch, want about %.1f ms (5 ms each tenth of %d exchanges)", got/1e6, want/1e6, st.Windows)
	}
	// The finding says the figures are of the stretch, and which.
	sum := summarizeReplaying(run, budget)
	if f := strings.Join(sum.Findings, "\n"); !strings.Contains(f, "of the stretch replayed") || !strings.Contains(f, "too long to replay whole") {
		t.Errorf("the findings do not say the replay covered a stretch:\n%s", f)
	}
	clean := summarizeReplaying(halo{ranks: 4, iters: 400, slow: -1}.run(), budget).Stragglers
	if clean.Sample == nil || len(clean.Named) != 0 {
		t.Errorf("clean run: sample %+v, named %v", clean.Sample, clean.Named)
	}
}
