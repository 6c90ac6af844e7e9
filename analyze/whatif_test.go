package analyze

import (
	"math"
	"slices"
	"testing"

	"github.com/commprof/commprof/trace"
)

// haloRun is a halo exchange as the PMPI library records it: on each of
// ranks ranks, iters iterations of work, an Irecv from each neighbour, an
// Isend to each, and a Waitall (a wait event per request, every one from
// the Waitall's start to its end, and each message's event from its post
// to that end). Rank slow sleeps stall more before the exchange of the
// iterations in stalls. Messages take 10 µs; a rank's Waitall returns
// 1 µs after its last message arrived. When polled, rank 0 tests its
// requests from the moment it posted its receives (its wait events start
// before its sends' posts), as a program that polls with MPI_Test does.
func haloRun(ranks, iters, slow int, stall int64, stalls []int, polled bool) *trace.Run {
	const (
		us      = int64(1000)
		latency = 10 * us
	)
	var evs []trace.Event
	release := make([]int64, ranks) // when each rank's last Waitall returned
	for it := range iters {
		post := make([]int64, ranks)
		for r := range ranks {
			// Work with a little jitter that differs by rank and iteration.
			post[r] = release[r] + 1000*us + int64((r*7+it*13)%5)*us
			if r == slow && slices.Contains(stalls, it) {
				post[r] += stall
			}
		}
		for r := range ranks {
			left, right := (r+ranks-1)%ranks, (r+1)%ranks
			sendAt := post[r] + us
			waitAt := post[r] + 2*us
			arrive := max(post[left], post[right]) + us + latency
			end := max(waitAt, arrive) + us
			if polled && r == 0 {
				waitAt = post[r]
			}
			msgs := []trace.Event{
				message(trace.KindRecv, int32(r), int32(left), PointToPoint, "", 1, post[r], end-post[r], 64, 0),
				message(trace.KindRecv, int32(r), int32(right), PointToPoint, "", 2, post[r], end-post[r], 64, 0),
				message(trace.KindSend, int32(r), int32(left), PointToPoint, "", 2, sendAt, end-sendAt, 64, 0),
				message(trace.KindSend, int32(r), int32(right), PointToPoint, "", 1, sendAt, end-sendAt, 64, 0),
			}
			for _, m := range msgs {
				evs = append(evs, m, waitFor(m, waitAt))
			}
			release[r] = end
		}
	}
	return runOf(ranks, evs...)
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
		st := Summarize(haloRun(4, 40, 2, 10_000_000, []int{10, 30}, polled)).Stragglers
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
	st := Summarize(haloRun(4, 40, -1, 0, nil, false)).Stragglers
	if len(st.Named) != 0 || st.NoiseBoundNS < 0 || st.Confidence != nameConfidence {
		t.Fatalf("named %v, noise bound %d ns at %v: %+v", st.Named, st.NoiseBoundNS, st.Confidence, st.Ranks)
	}
}

// TestAShortRunGetsNoVerdict: three exchanges say nothing of the run's
// noise, and the stragglers say so rather than name anybody.
func TestAShortRunGetsNoVerdict(t *testing.T) {
	st := Summarize(haloRun(4, 3, 1, 10_000_000, []int{1}, false)).Stragglers
	if len(st.Named) != 0 || st.Undecided == "" || st.NoiseBoundNS != -1 {
		t.Fatalf("named %v, undecided %q, bound %d", st.Named, st.Undecided, st.NoiseBoundNS)
	}
}

// TestOneLongStallIsNamed: a rank that slept 200 ms once, in a run whose
// other ranks' windows never cost more than a few µs, is named at about
// those 200 ms: a single long stall is a real cost.
func TestOneLongStallIsNamed(t *testing.T) {
	st := Summarize(haloRun(4, 40, 1, 200_000_000, []int{20}, false)).Stragglers
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
