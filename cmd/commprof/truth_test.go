package main

// Truth tests: figures of recorded runs checked against a truth known
// from outside the analyzer — faults injected on purpose, figures
// recomputed here from the raw events by other means, a benchmark's own
// table — under the conditions users have: 4 ranks on a machine with
// fewer cores, and GOMAXPROCS 1. The margins are relations, not clocks:
// these tests assert no wall-clock time. docs/benchmarks.md records what
// each measured.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/bench"
	"github.com/commprof/commprof/inject"
	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/trace"
)

// truthTrain records the reference trainer on 4 ranks with a small data
// set (31 steps of batch 64) and extra arguments, confined to two cores.
func truthTrain(t *testing.T, dir string, env []string, record []string, train ...string) (*analyze.Summary, *trace.Run) {
	t.Helper()
	args := append([]string{"record", "--ranks", "4", "--out", dir}, record...)
	args = append(args, "--", "train", "--epochs", "1", "--synthetic-size", "8000")
	args = append(args, train...)
	r := truthRun(t, env, args...)
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	return statsJSON(t, dir), run
}

// truthRun runs commprof confined to two cores, so that the truth tests'
// 4 ranks outnumber their cores on any machine, as users' often do.
func truthRun(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return commprofUnder(t, twoCores(t), env, args...)
}

// twoCores returns the command that confines a program to cores 0 and 1,
// or none on a machine with no more than two.
func twoCores(t *testing.T) []string {
	t.Helper()
	if runtime.NumCPU() <= 2 {
		return nil
	}
	ts, err := exec.LookPath("taskset")
	if err != nil {
		t.Fatalf("the truth tests confine their ranks to two cores with taskset (util-linux): %v", err)
	}
	return []string{ts, "-c", "0,1"}
}

// oversubscribed says what the test conditions are, for the log.
func oversubscribed(t *testing.T) {
	t.Logf("4 ranks on %d cores", min(runtime.NumCPU(), 2))
}

// TestTruthCollectiveEndsWithItsMessages: in training runs, with ranks
// outnumbering cores, a collective's recorded end is within a millisecond
// of its last message's end (median) and five (p90): in the default run,
// and with small buckets overlapped with backward on one thread a rank
// (GOMAXPROCS 1), where the program waits on a request long after
// calling it.
func TestTruthCollectiveEndsWithItsMessages(t *testing.T) {
	oversubscribed(t)
	for _, tc := range []struct {
		name  string
		env   []string
		train []string
	}{
		{"default", nil, nil},
		{"small-buckets", []string{"GOMAXPROCS=1"}, []string{"--bucket-mb", "0.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, run := truthTrain(t, filepath.Join(t.TempDir(), "r"), tc.env, nil, tc.train...)
			checkEnds(t, run)
		})
	}
}

// checkEnds compares every collective's end with its last message's.
func checkEnds(t *testing.T, run *trace.Run) {
	t.Helper()
	var gaps []int64
	for _, rk := range run.Ranks {
		type key struct {
			comm string
			seq  int64
		}
		last := map[key]int64{}
		for _, e := range rk.Events {
			switch e.Kind {
			case trace.KindSend, trace.KindRecv, trace.KindReduce:
				if e.Name != analyze.PointToPoint {
					k := key{e.Comm, e.Seq}
					last[k] = max(last[k], e.End())
				}
			}
		}
		for _, e := range rk.Events {
			if m, ok := last[key{e.Comm, e.Seq}]; ok && e.Kind == trace.KindCollective {
				gaps = append(gaps, e.End()-m)
			}
		}
	}
	if len(gaps) < 100 {
		t.Fatalf("%d collectives with messages", len(gaps))
	}
	slices.Sort(gaps)
	med, p90 := gaps[len(gaps)/2], gaps[len(gaps)*9/10]
	t.Logf("collective end - last message end over %d calls: median %v ns, p90 %v ns, min %v", len(gaps), med, p90, gaps[0])
	if gaps[0] < 0 {
		t.Errorf("a collective ends %d ns before its own last message", -gaps[0])
	}
	if med > 1e6 || p90 > 5e6 {
		t.Errorf("collectives end a median %v ns (p90 %v) after their last message; want under 1 ms and 5 ms", med, p90)
	}
}

// exposedByHand recomputes one rank's exposed time inside [lo, hi) by a
// sweep over the raw events' boundaries: time inside some communication
// call (a collective or a point-to-point message of the program's own)
// while the program was blocked (in a blocking call, or in a wait).
func exposedByHand(evs []trace.Event, lo, hi int64) (comm, exposed int64) {
	type edge struct {
		at          int64
		comm, block int
	}
	waited := map[string]bool{}
	for _, e := range evs {
		if e.Kind == trace.KindWait {
			waited[e.Comm+"#"+strconv.FormatInt(e.Seq, 10)] = true
		}
	}
	var edges []edge
	add := func(s, e int64, c, b int) {
		s, e = max(s, lo), min(e, hi)
		if s < e {
			edges = append(edges, edge{s, c, b}, edge{e, -c, -b})
		}
	}
	for _, e := range evs {
		switch {
		case e.Kind == trace.KindCollective:
			block := 1
			if waited[e.Comm+"#"+strconv.FormatInt(e.Seq, 10)] {
				block = 0
			}
			add(e.Start, e.End(), 1, block)
		case e.Kind == trace.KindWait:
			add(e.Start, e.End(), 0, 1)
		case (e.Kind == trace.KindSend || e.Kind == trace.KindRecv) && e.Name == analyze.PointToPoint:
			add(e.Start, e.End(), 1, 1)
		}
	}
	sort.Slice(edges, func(i, j int) bool { return edges[i].at < edges[j].at })
	var c, b int
	var prev int64
	for _, ed := range edges {
		if c > 0 {
			comm += ed.at - prev
			if b > 0 {
				exposed += ed.at - prev
			}
		}
		c += ed.comm
		b += ed.block
		prev = ed.at
	}
	return comm, exposed
}

// checkStepsByHand compares every step's exposed and overlapped time with
// the sweep's, averaged over the ranks as the summary does.
func checkStepsByHand(t *testing.T, s *analyze.Summary, run *trace.Run) (exposed, overlapped float64) {
	t.Helper()
	type acc struct {
		n        int
		exp, ovl float64
	}
	steps := map[int32]*acc{}
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			if e.Kind != trace.KindStep {
				continue
			}
			comm, exp := exposedByHand(rk.Events, e.Start, e.End())
			a := steps[e.Step]
			if a == nil {
				a = &acc{}
				steps[e.Step] = a
			}
			a.n++
			a.exp += float64(exp)
			a.ovl += float64(comm - exp)
		}
	}
	if len(s.Steps) != len(steps) || len(steps) == 0 {
		t.Fatalf("%d steps in the summary, %d in the events", len(s.Steps), len(steps))
	}
	for _, st := range s.Steps {
		a := steps[int32(st.Step)]
		wantE, wantO := a.exp/float64(a.n), a.ovl/float64(a.n)
		if math.Abs(st.ExposedNS-wantE) > 1 || math.Abs(st.OverlappedNS-wantO) > 1 {
			t.Errorf("step %d: exposed %.0f overlapped %.0f ns; from the events %.0f and %.0f", st.Step, st.ExposedNS, st.OverlappedNS, wantE, wantO)
		}
		exposed += st.ExposedNS
		overlapped += st.OverlappedNS
	}
	return exposed, overlapped
}

// computeAfterCall sums, over rank r's steps, the compute that ran
// after the step's first allreduce was called: the most communication
// could overlap, known from the trainer's own spans. idle is the time
// after that call, within the step, that the program's own thread spent
// in none of its compute, its waits and its blocking calls (bookkeeping
// between events, or the rank descheduled on a busy machine), during
// which communication in flight overlaps nothing recorded. The messages
// of a call in flight, which the communication's own goroutine records
// meanwhile, do not make that time busy: with a core kept busy they
// covered up to 3% of the compute in such gaps.
func computeAfterCall(run *trace.Run, r int) (ns, idle float64) {
	for _, rk := range run.Ranks {
		if rk.Info.Rank != r {
			continue
		}
		first, end := map[int32]int64{}, map[int32]int64{}
		for _, e := range rk.Events {
			if e.Kind == trace.KindCollective && e.Name == "allreduce" && e.Step >= 0 {
				if f, ok := first[e.Step]; !ok || e.Start < f {
					first[e.Step] = e.Start
				}
			}
			if e.Kind == trace.KindStep {
				end[e.Step] = e.End()
			}
		}
		// The calls the program waited on ran behind it: their spans
		// are not its thread's.
		waited := map[[2]any]bool{}
		for _, e := range rk.Events {
			if e.Kind == trace.KindWait {
				waited[[2]any{e.Comm, e.Seq}] = true
			}
		}
		covered := map[int32][][2]int64{}
		for _, e := range rk.Events {
			f, ok := first[e.Step]
			switch {
			case !ok:
				continue
			case e.Kind == trace.KindCompute, e.Kind == trace.KindWait:
			case e.Kind == trace.KindCollective && !waited[[2]any{e.Comm, e.Seq}]:
			default:
				continue // steps, marks, samples, messages, calls in flight
			}
			if e.Kind == trace.KindCompute && e.End() > f {
				ns += float64(e.End() - max(e.Start, f))
			}
			lo, hi := max(e.Start, f), min(e.End(), end[e.Step])
			if hi > lo {
				covered[e.Step] = append(covered[e.Step], [2]int64{lo, hi})
			}
		}
		for step, f := range first {
			cs := covered[step]
			slices.SortFunc(cs, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
			at, busy := f, int64(0)
			for _, c := range cs {
				lo := max(c[0], at)
				if c[1] > lo {
					busy += c[1] - lo
					at = c[1]
				}
			}
			idle += float64(max(end[step]-f-busy, 0))
		}
	}
	return ns, idle
}

// TestTruthExposedAndOverlapped: per-step exposed and overlapped time
// equal the sweep's over the raw events, and agree with what the trainer
// did. By default the gradients go in one bucket called after backward,
// so nothing is overlapped; in small buckets the first is called before
// the last layer's backward and overlaps it, by no more than the compute
// after the call; with overlap off nothing is overlapped.
func TestTruthExposedAndOverlapped(t *testing.T) {
	oversubscribed(t)
	for _, tc := range []struct {
		name  string
		env   []string
		train []string
	}{
		{"one-bucket", nil, nil},
		{"small-buckets", []string{"GOMAXPROCS=1"}, []string{"--bucket-mb", "0.1"}},
		{"no-overlap", []string{"GOMAXPROCS=1"}, []string{"--bucket-mb", "0.1", "--overlap=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, run := truthTrain(t, filepath.Join(t.TempDir(), "r"), tc.env, nil, tc.train...)
			exp, ovl := checkStepsByHand(t, s, run)
			share := ovl / (exp + ovl)
			t.Logf("%s: exposed %.3g ns, overlapped %.3g ns (%.1f%%) over %d steps", tc.name, exp, ovl, 100*share, len(s.Steps))
			switch tc.name {
			case "one-bucket":
				if share > 0.05 {
					t.Errorf("one bucket called after backward, yet %.1f%% of communication is overlapped", 100*share)
				}
			case "small-buckets":
				if share < 0.1 {
					t.Errorf("small buckets called during backward, yet only %.1f%% of communication is overlapped", 100*share)
				}
				for _, r := range s.Ranks {
					// Communication overlaps what the rank does after its
					// first bucket's call: its compute, and the gaps its
					// thread spent in no compute, wait or blocking call.
					// With a core kept busy overlap read 0.92-0.96 of that
					// in 12 ranks' runs; compute and waits are timed apart,
					// each with its own clock reads, so 3% is allowed.
					comp, idle := computeAfterCall(run, r.Rank)
					t.Logf("rank %d: overlapped %d ns; after its first call it computed %.0f ns, %.0f ns between events", r.Rank, r.OverlappedNS, comp, idle)
					if float64(r.OverlappedNS) > 1.03*(comp+idle) {
						t.Errorf("rank %d overlapped %d ns, more than the %.0f ns it computed after its first bucket was called and the %.0f ns between its events", r.Rank, r.OverlappedNS, comp, idle)
					}
				}
			case "no-overlap":
				if ovl != 0 {
					t.Errorf("without overlap, %.0f ns were overlapped", ovl)
				}
				for _, r := range s.Ranks {
					if r.OverlappedNS != 0 {
						t.Errorf("rank %d overlapped %d ns without overlap", r.Rank, r.OverlappedNS)
					}
				}
			}
		})
	}
}

// injectedInSteps sums what rank r recorded of the mark name (delays, or
// stops: each from the mark's time for its value in ns) inside its
// training steps; set-up and evaluation are outside them.
func injectedInSteps(run *trace.Run, r int, name string) float64 {
	return markedInSteps(run, r, name, nil)
}

// markedInSteps sums the spans of rank r's marks called name inside its
// training steps, less their overlap with the spans in except.
func markedInSteps(run *trace.Run, r int, name string, except [][2]int64) (ns float64) {
	for _, rk := range run.Ranks {
		if rk.Info.Rank != r {
			continue
		}
		var steps [][2]int64
		for _, e := range rk.Events {
			if e.Kind == trace.KindStep {
				steps = append(steps, [2]int64{e.Start, e.End()})
			}
		}
		for _, e := range rk.Events {
			if e.Kind != trace.KindMark || e.Name != name {
				continue
			}
			from, to := e.Start, e.Start+int64(e.Value)
			for _, st := range steps {
				lo, hi := max(from, st[0]), min(to, st[1])
				if lo >= hi {
					continue
				}
				ns += float64(hi - lo)
				for _, w := range except {
					if a, b := max(lo, w[0]), min(hi, w[1]); a < b {
						ns -= float64(b - a)
					}
				}
			}
		}
	}
	return ns
}

// waitingSpans lists, from the raw events, the times rank r spent in a
// world collective before its last member arrived: stopped then, it held
// no one up (unless it was still stopped when the last one came).
func waitingSpans(run *trace.Run, r int) [][2]int64 {
	last := map[int64]int64{}
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			if e.Kind == trace.KindCollective && e.Comm == "world" {
				last[e.Seq] = max(last[e.Seq], e.Start)
			}
		}
	}
	var out [][2]int64
	for _, rk := range run.Ranks {
		if rk.Info.Rank != r {
			continue
		}
		for _, e := range rk.Events {
			if e.Kind == trace.KindCollective && e.Comm == "world" && last[e.Seq] > e.Start {
				out = append(out, [2]int64{e.Start, min(last[e.Seq], e.End())})
			}
		}
	}
	return out
}

// stoppedHoldingUp sums the time rank r was stopped inside its steps
// other than while it waited for the others to arrive at a collective:
// the time its stops could hold the others up.
func stoppedHoldingUp(run *trace.Run, r int) float64 {
	return markedInSteps(run, r, inject.MarkStall, waitingSpans(run, r))
}

// computeInSteps sums rank r's compute spans inside its training steps.
func computeInSteps(run *trace.Run, r int) (ns float64) {
	for _, rk := range run.Ranks {
		if rk.Info.Rank != r {
			continue
		}
		for _, e := range rk.Events {
			if e.Kind == trace.KindCompute && e.Step >= 0 {
				ns += float64(e.Dur)
			}
		}
	}
	return ns
}

// waitedForMessages sums, from the raw events, the time rank waiter's
// receives inside world collectives waited for their first byte after
// rank late had arrived at the collective: waiting for late's messages
// rather than for it to come.
func waitedForMessages(run *trace.Run, waiter, late int) (ns float64) {
	arrived := map[int64]int64{}
	for _, rk := range run.Ranks {
		if rk.Info.Rank != late {
			continue
		}
		for _, e := range rk.Events {
			if e.Kind == trace.KindCollective && e.Comm == "world" {
				arrived[e.Seq] = e.Start
			}
		}
	}
	for _, rk := range run.Ranks {
		if rk.Info.Rank != waiter {
			continue
		}
		for _, e := range rk.Events {
			a, ok := arrived[e.Seq]
			if !ok || e.Kind != trace.KindRecv || e.Comm != "world" || e.Name == analyze.PointToPoint || e.Step < 0 {
				continue
			}
			if from, to := max(e.Start, a), e.Start+e.Wait; to > from {
				ns += float64(to - from)
			}
		}
	}
	return ns
}

// serverWaitedFor sums, from the raw events, the time rank server's
// point-to-point receives from worker waited for their first byte inside
// the server's steps.
func serverWaitedFor(run *trace.Run, server, worker int) (ns float64) {
	for _, rk := range run.Ranks {
		if rk.Info.Rank != server {
			continue
		}
		for _, e := range rk.Events {
			if e.Kind == trace.KindRecv && e.Name == analyze.PointToPoint && int(e.Peer) == worker && e.Step >= 0 {
				ns += float64(e.Wait)
			}
		}
	}
	return ns
}

// lateBeyondOthers recomputes from the raw arrivals how much of the
// lateness of ranks set others could not hide: over the world collectives
// one of them came last to, the latest of their arrivals minus the latest
// of the others'. Removing their delays can save no more than this, and
// saves about this.
func lateBeyondOthers(run *trace.Run, set ...int) (ns float64) {
	arrivals := map[int64]map[int]int64{}
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			if e.Kind == trace.KindCollective && e.Comm == "world" {
				if arrivals[e.Seq] == nil {
					arrivals[e.Seq] = map[int]int64{}
				}
				arrivals[e.Seq][rk.Info.Rank] = e.Start
			}
		}
	}
	for _, a := range arrivals {
		mine, next := int64(math.MinInt64), int64(math.MinInt64)
		for q, t := range a {
			if slices.Contains(set, q) {
				mine = max(mine, t)
			} else {
				next = max(next, t)
			}
		}
		if mine > next && next > math.MinInt64 {
			ns += float64(mine - next)
		}
	}
	return ns
}

// TestTruthStragglers: a rank held back 20 ms before every collective is
// named, whichever rank it is, and the time it cost is recovered within
// −40%/+30% of the delays it recorded inside steps and within 25% of its
// lateness beyond the next latest rank, computed from the raw arrivals;
// two ranks held back alike are both named; runs with nothing injected,
// and a parameter server (a hub every exchange goes through), name no
// one.
func TestTruthStragglers(t *testing.T) {
	oversubscribed(t)
	for r := range 4 {
		t.Run(fmt.Sprintf("rank%d", r), func(t *testing.T) {
			spec := fmt.Sprintf("delay:rank=%d,dur=20ms,every=1", r)
			s, run := truthTrain(t, filepath.Join(t.TempDir(), "r"), nil, []string{"--inject", spec})
			st := s.Stragglers
			injected, late := injectedInSteps(run, r, inject.MarkDelay), lateBeyondOthers(run, r)
			if len(s.Run.Injected) != 1 || s.Run.Injected[0] != spec || injected < 20e6*float64(len(s.Steps)) {
				t.Fatalf("injected %v, delays recorded in steps %.0f ns", s.Run.Injected, injected)
			}
			if len(st.Named) == 0 || st.Named[0] != r || s.Headline.Straggler != r {
				t.Fatalf("named %v (headline %d), want rank %d first: %+v", st.Named, s.Headline.Straggler, r, st.Ranks)
			}
			cost := float64(st.Ranks[0].CostNS)
			t.Logf("rank %d: cost %.3fs; injected in steps %.3fs (%.0f%%), late beyond the others %.3fs (%.0f%%); in %d of %d steps; replay error %d ns",
				r, cost/1e9, injected/1e9, 100*cost/injected, late/1e9, 100*cost/late, st.Ranks[0].Windows, st.Windows, st.ReplayErrorNS)
			// While the rank sleeps, the other three of 4 ranks on 2
			// cores (and whatever else keeps the machine busy) share the
			// cores among fewer and run faster, as for a stopped rank
			// below: the job loses from about two thirds of the delays to
			// all of them (64% with a core kept busy, 59% once in CI,
			// where the raw arrivals said 0.408 s of 0.620 s and the
			// replay 0.369 s), and the raw arrivals, which the busy
			// machine's hiccups on the others shorten, say about as much
			// (84% of the delays there). Against the delays the range is
			// wide; against the raw lateness (below) it is 25%.
			if cost < 0.5*injected || cost > 1.3*injected {
				t.Errorf("rank %d's cost %.0f ns is not within -50%%/+30%% of the %.0f ns injected", r, cost, injected)
			}
			if math.Abs(cost-late) > 0.25*late {
				t.Errorf("rank %d's cost %.0f ns is not within 25%% of its lateness beyond the others, %.0f ns", r, cost, late)
			}
			if st.ReplayErrorNS > 1000 {
				t.Errorf("the replay of the recorded run is off by %d ns", st.ReplayErrorNS)
			}
		})
	}
	// Two ranks held back alike hide each other: each is named, and they
	// share what both cost, which is about one rank's delays, as they
	// were delayed at the same calls.
	t.Run("two", func(t *testing.T) {
		s, run := truthTrain(t, filepath.Join(t.TempDir(), "r"), nil,
			[]string{"--inject", "delay:rank=1,dur=20ms,every=1", "--inject", "delay:rank=3,dur=20ms,every=1"})
		named := slices.Sorted(slices.Values(s.Stragglers.Named))
		if !slices.Equal(named, []int{1, 3}) {
			t.Fatalf("named %v, want ranks 1 and 3: %+v", s.Stragglers.Named, s.Stragglers.Ranks)
		}
		both := float64(s.Stragglers.Ranks[0].CostNS + s.Stragglers.Ranks[1].CostNS)
		injected := (injectedInSteps(run, 1, inject.MarkDelay) + injectedInSteps(run, 3, inject.MarkDelay)) / 2
		late := lateBeyondOthers(run, 1, 3)
		t.Logf("ranks 1 and 3 cost %.3fs together; each was held back %.3fs in steps (%.0f%%); late beyond the others %.3fs (%.0f%%)",
			both/1e9, injected/1e9, 100*both/injected, late/1e9, 100*both/late)
		if both < 0.7*injected || both > 1.3*injected {
			t.Errorf("ranks 1 and 3 cost %.0f ns together, not within 30%% of the %.0f ns each was held back", both, injected)
		}
		// Their lateness beyond the others is measured on the raw
		// arrivals, which a busy machine's hiccups on the other two ranks
		// shorten: 18% with one core kept busy.
		if math.Abs(both-late) > 0.25*late {
			t.Errorf("ranks 1 and 3 cost %.0f ns together, not within 25%% of their lateness beyond the others, %.0f ns", both, late)
		}
	})
	// A rank the operating system stops now and then (SIGSTOP and
	// SIGCONT: compute, messages and all) is named whichever it is, and
	// costs about the time it was stopped inside steps.
	for r := range 4 {
		t.Run(fmt.Sprintf("stall%d", r), func(t *testing.T) {
			spec := fmt.Sprintf("stall:rank=%d,dur=30ms,period=150ms", r)
			// Two epochs of 62 steps: about ten stops inside steps, so that
			// the busy machine's noise averages out of the cost.
			s, run := truthTrain(t, filepath.Join(t.TempDir(), "r"), nil, []string{"--inject", spec}, "--synthetic-size", "16000", "--epochs", "2")
			st := s.Stragglers
			stopped := injectedInSteps(run, r, inject.MarkStall)
			if stopped < 3*30e6 {
				t.Fatalf("rank %d was stopped %.0f ns inside steps; the test needs at least three stops", r, stopped)
			}
			if len(st.Named) == 0 || st.Named[0] != r || s.Headline.Straggler != r {
				t.Fatalf("named %v (headline %d), want rank %d first: %+v", st.Named, s.Headline.Straggler, r, st.Ranks)
			}
			cost, holding := float64(st.Ranks[0].CostNS), stoppedHoldingUp(run, r)
			t.Logf("rank %d: cost %.3fs; stopped in steps %.3fs (%.0f%%), of it not waiting for others %.3fs (%.0f%%); in %d of %d steps",
				r, cost/1e9, stopped/1e9, 100*cost/stopped, holding/1e9, 100*cost/holding, st.Ranks[0].Windows, st.Windows)
			// While the rank is stopped, the other three of 4 ranks on 2
			// cores share the cores among fewer, and their own work runs
			// up to a third faster: the job loses between about two
			// thirds of the stop and all of it (81-111% idle here, 67%
			// once in CI).
			if cost < 0.6*holding || cost > 1.3*holding {
				t.Errorf("rank %d's cost %.0f ns is not within -40%%/+30%% of the %.0f ns it was stopped in steps while not waiting for others", r, cost, holding)
			}
		})
	}
	// A rank that shares its core with three busy threads, on a machine
	// with a core per rank, is named, and costs about what the other rank
	// waited for it: its lateness at each call, and then its messages
	// (its part of each transfer is slow too). Three, so that it stands
	// out also when another process keeps the other rank's core busy.
	t.Run("hog", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "r")
		r := truthRun(t, nil, "record", "--ranks", "2", "--out", dir, "--inject", "hog:rank=1,threads=3", "--", "train", "--epochs", "1", "--synthetic-size", "8000")
		if r.code != 0 {
			t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		s := statsJSON(t, dir)
		run, err := trace.ReadRun(dir)
		if err != nil {
			t.Fatal(err)
		}
		st := s.Stragglers
		waited := lateBeyondOthers(run, 1) + waitedForMessages(run, 0, 1)
		if len(st.Named) != 1 || st.Named[0] != 1 {
			t.Fatalf("named %v, want rank 1: %+v", st.Named, st.Ranks)
		}
		cost := float64(st.Ranks[0].CostNS)
		t.Logf("rank 1: cost %.3fs; rank 0 waited for it %.3fs (%.0f%%); its compute beyond rank 0's %.3fs", cost/1e9, waited/1e9, 100*cost/waited,
			(computeInSteps(run, 1)-computeInSteps(run, 0))/1e9)
		if cost < 0.7*waited || cost > 1.3*waited {
			t.Errorf("rank 1's cost %.0f ns is not within 30%% of the %.0f ns rank 0 waited for it", cost, waited)
		}
	})
	// A parameter server's worker held back is named, not the server
	// every exchange goes through, and costs about what the server spent
	// waiting for its pushes. (Not what it was held back: while it
	// sleeps, the ranks sharing its cores run faster.)
	t.Run("parameter-server-worker", func(t *testing.T) {
		s, run := truthTrain(t, filepath.Join(t.TempDir(), "r"), nil, []string{"--inject", "delay:rank=2,dur=20ms,every=1"}, "--sync", "ps")
		st := s.Stragglers
		waited := serverWaitedFor(run, 0, 2)
		if len(st.Named) != 1 || st.Named[0] != 2 {
			t.Fatalf("named %v, want worker 2 alone: %+v", st.Named, st.Ranks)
		}
		cost := float64(st.Ranks[0].CostNS)
		t.Logf("worker 2: cost %.3fs; the server waited for it %.3fs in steps (%.0f%%); held back %.3fs", cost/1e9, waited/1e9, 100*cost/waited,
			injectedInSteps(run, 2, inject.MarkDelay)/1e9)
		if cost < 0.7*waited || cost > 1.3*waited {
			t.Errorf("worker 2's cost %.0f ns is not within 30%% of the %.0f ns the server waited for it", cost, waited)
		}
	})
	for _, tc := range []struct {
		name  string
		env   []string
		train []string
	}{
		{"clean", nil, nil},
		{"clean-gomaxprocs1", []string{"GOMAXPROCS=1"}, nil},
		{"parameter-server", nil, []string{"--sync", "ps"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := truthTrain(t, filepath.Join(t.TempDir(), "r"), tc.env, nil, tc.train...)
			st := s.Stragglers
			if !st.Replayed || len(st.Named) != 0 || s.Headline.Straggler != -1 {
				t.Fatalf("named %v (headline %d) in a run with no straggler: %+v", st.Named, s.Headline.Straggler, st.Ranks)
			}
			t.Logf("costliest rank %d: %.1f%% of the run", st.Ranks[0].Rank, 100*st.Ranks[0].Share)
		})
	}
}

// TestTruthSlowLink: a link capped at 20 MB/s from rank 0 to rank 1 is
// the slowest edge of the traffic matrix (bytes over the senders' time),
// at its cap.
func TestTruthSlowLink(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	r := truthRun(t, nil, "record", "--ranks", "4", "--out", dir, "--inject", "link:from=0,to=1,rate=20MB/s", "--",
		"bench", "allreduce", "--algo", "ring", "--min", "1M", "--max", "1M", "--iters", "5", "--warmup", "1")
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	s := statsJSON(t, dir)
	m := s.Matrix.Dense()
	bw := func(a, b int) float64 { return float64(m.Bytes[a][b]) / float64(m.SendNS[a][b]) }
	slow := bw(0, 1)
	t.Logf("edge 0→1: %.4f GB/s (cap 0.02); 1→2 %.4f, 2→3 %.4f, 3→0 %.4f", slow, bw(1, 2), bw(2, 3), bw(3, 0))
	if slow > 0.02*1.05 || slow < 0.02*0.7 {
		t.Errorf("edge 0→1 moved %.4f GB/s over a link capped at 0.02; want the cap, within -30%% and +5%%", slow)
	}
	for _, e := range [][2]int{{1, 2}, {2, 3}, {3, 0}} {
		if b := bw(e[0], e[1]); b < 2*slow {
			t.Errorf("edge %d→%d at %.4f GB/s is not clearly faster than the capped 0→1 (%.4f)", e[0], e[1], b, slow)
		}
	}
}

// TestTruthBenchBusbw: a recorded bench run's busbw per size in stats is
// the benchmark's own table's, within 2%, and rank 0's timed calls read
// straight from the events agree.
func TestTruthBenchBusbw(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	r := truthRun(t, nil, "record", "--ranks", "4", "--out", dir, "--", "bench", "allreduce", "--min", "64K", "--max", "4M", "--json")
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var rows []bench.Result
	if err := jsonPrefix(r.stdout, &rows); err != nil || len(rows) != 4 {
		t.Fatalf("bench JSON: %v %d rows\n%s", err, len(rows), r.stdout)
	}
	s := statsJSON(t, dir)
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	fromEvents := busbwFromEvents(run, 4)
	for _, row := range rows {
		var got *analyze.CollStats
		for i, c := range s.Collectives {
			if c.Op == "allreduce" && c.Bucket == analyze.SizeBucket(row.Bytes) {
				got = &s.Collectives[i]
			}
		}
		if got == nil {
			t.Fatalf("no stats for %d bytes", row.Bytes)
		}
		ev := fromEvents[row.Bytes]
		t.Logf("%8d B: bench %.4f GB/s, stats %.4f, rank 0's timed calls back to back %.4f", row.Bytes, row.BusBW, got.BusBWGBps, ev)
		if math.Abs(got.BusBWGBps-row.BusBW) > 0.02*row.BusBW || got.Calls != 20 {
			t.Errorf("%d bytes: stats busbw %.4f over %d calls, bench's table %.4f over 20", row.Bytes, got.BusBWGBps, got.Calls, row.BusBW)
		}
		// The calls themselves, without the gaps between them, are no
		// slower than the table says, and not much faster: a rank
		// descheduled between two calls (4 ranks on 2 cores; its sampler
		// reading /proc) lengthens the table's timed loop but no call, by
		// up to a quarter at 64 KiB, whose 20 calls take about 2.5 ms
		// (seen once in CI: 1.17x; 1.00-1.06x in 12 sizes run here idle).
		if ev < 0.98*row.BusBW || ev > 1.25*row.BusBW {
			t.Errorf("%d bytes: rank 0's timed calls run at %.4f GB/s busbw, the table %.4f", row.Bytes, ev, row.BusBW)
		}
	}
}

// busbwFromEvents computes from rank 0's raw events, by size, the busbw
// of its allreduce calls inside the timed regions: bytes x 2(n-1)/n over
// the mean call.
func busbwFromEvents(run *trace.Run, n int) map[int64]float64 {
	type acc struct{ ns, calls int64 }
	by := map[int64]*acc{}
	for _, rk := range run.Ranks {
		if rk.Info.Rank != 0 {
			continue
		}
		timed := false
		for _, e := range rk.Events {
			switch {
			case e.Kind == trace.KindMark && e.Name == trace.MarkTimed:
				timed = e.Value == 1
			case timed && e.Kind == trace.KindCollective && e.Name == "allreduce":
				a := by[e.Bytes]
				if a == nil {
					a = &acc{}
					by[e.Bytes] = a
				}
				a.ns += e.Dur
				a.calls++
			}
		}
	}
	out := map[int64]float64{}
	for b, a := range by {
		out[b] = float64(b) * 2 * float64(n-1) / float64(n) / (float64(a.ns) / float64(a.calls))
	}
	return out
}

// jsonPrefix decodes the JSON value at the start of s (record prints its
// own lines after the program's output).
func jsonPrefix(s string, v any) error {
	return json.NewDecoder(strings.NewReader(s)).Decode(v)
}

// TestTruthCalibratedModel: `commprof calibrate` on 2 and 4 ranks of
// this machine predicts a held-out 3-rank bench (other algorithms, a
// fold to a power of two, 1.5 ranks per core) with a median error within
// 50% over the sizes from 256 KiB. The held-out run itself varies: in 14
// runs of this test its two runs differed by a median 2-58%, and the
// model's error was 3-35%; a single held-out run, measured once after
// the calibration, was missed by 9-53%.
//
// The ranks talk over TCP. Over shared memory with more ranks than cores
// a call's time is the scheduler's: two 3-rank runs of the same bench on
// this machine took 0.87 and 2.28 ms for a 2 MiB ring allreduce, 2.25 and
// 4.80 ms at 4 MiB (docs/metrics.md, "The model").
func TestTruthCalibratedModel(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.json")
	tcp := []string{envnames.Transport + "=tcp"}
	// The held-out bench runs before the calibration and after it, and
	// is measured by the two runs' mean: a machine that drifts in speed
	// over the test is then seen at the same moments by both sides.
	heldOut := func(name string) string {
		held := filepath.Join(dir, name)
		if r := truthRun(t, tcp, "record", "--ranks", "3", "--out", held, "--", "bench", "allreduce", "--min", "256K", "--max", "8M", "--factor", "2", "--iters", "40"); r.code != 0 {
			t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		return held
	}
	before := heldOut("before")
	r := truthRun(t, tcp, "calibrate", "--ranks", "2,4", "--min", "64K", "--max", "8M", "--factor", "2", "--iters", "40", "-o", model)
	if r.code != 0 {
		t.Fatalf("calibrate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Log(strings.TrimSpace(r.stdout))
	after := heldOut("after")
	check := func(held string) []analyze.CallSize {
		r := commprof(t, nil, "predict", held, "--model", model, "--ranks", "3", "--check", held, "--format", "json")
		var p analyze.Prediction
		if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || r.code != 0 || p.Check == nil {
			t.Fatalf("predict: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
		}
		return p.Check.Calls
	}
	a, b := check(before), check(after)
	if len(a) != len(b) {
		t.Fatalf("the held-out runs have %d and %d sizes", len(a), len(b))
	}
	var errs, spread []float64
	for i, c := range a {
		if b[i].Bytes != c.Bytes || b[i].Algo != c.Algo {
			t.Fatalf("size %d: %d B %s before, %d B %s after", i, c.Bytes, c.Algo, b[i].Bytes, b[i].Algo)
		}
		measured := (c.MeasuredNS + b[i].MeasuredNS) / 2
		e := (c.ModeledNS - measured) / measured
		t.Logf("3 ranks, %8d B %-12s: measured %.0f and %.0f ns, predicted %.0f (%+.0f%%)", c.Bytes, c.Algo, c.MeasuredNS, b[i].MeasuredNS, c.ModeledNS, 100*e)
		errs = append(errs, math.Abs(e))
		spread = append(spread, math.Abs(c.MeasuredNS-b[i].MeasuredNS)/measured)
	}
	slices.Sort(errs)
	slices.Sort(spread)
	med := errs[(len(errs)-1)/2]
	t.Logf("median error %.0f%% over %d sizes; the two held-out runs differ by a median %.0f%%", 100*med, len(errs), 100*spread[(len(spread)-1)/2])
	if len(errs) < 5 || med > 0.5 {
		t.Errorf("median error %.0f%% over %d sizes, want at most 50%%", 100*med, len(errs))
	}
}

// TestTruthDiffUnderLoad: a second run of one configuration, at a lower
// priority while other processes keep both of the ranks' cores busy, is
// slower, and its ranks wait for a core; the diff names none of that
// better or worse, and says the load may account for it. A rank delayed
// 3 ms a step on purpose, on the same machine without those processes,
// is worse (on a machine busy before the test began, worse or within
// noise). The machine may be busy already: the test adds its load to
// whatever is there.
func TestTruthDiffUnderLoad(t *testing.T) {
	dir := t.TempDir()
	recUnder := func(wrap []string, name string, extra ...string) string {
		out := filepath.Join(dir, name)
		args := append([]string{"record", "--ranks", "2", "--out", out}, extra...)
		args = append(args, "--", "train", "--epochs", "1", "--batch-size", "16", "--synthetic-size", "8000")
		if r := commprofUnder(t, append(wrap, twoCores(t)...), nil, args...); r.code != 0 {
			t.Fatalf("record %s: exit %d\n%s", name, r.code, r.stderr)
		}
		return out
	}
	rec := func(name string, extra ...string) string { return recUnder(nil, name, extra...) }
	a := rec("a")
	// Two spinning processes on each of the cores the ranks run on (cores
	// 0 and 1, truthRun), and B's ranks at a lower priority than theirs
	// (nice 10: a tenth of a spinner's weight), so that B's ranks wait for
	// a core however busy the machine already was. Without the lower
	// priority, on a machine whose two cores were already kept busy by
	// processes of other sessions, the hogs added 4 points to the ranks'
	// wait (54% of each step in A, 58% in B): the kernel shares a core
	// between sessions before processes.
	var hogs []*exec.Cmd
	ts, tsErr := exec.LookPath("taskset")
	for i := range 4 {
		hog := exec.Command("sh", "-c", "while :; do :; done")
		if tsErr == nil {
			hog = exec.Command(ts, "-c", strconv.Itoa(i%2), "sh", "-c", "while :; do :; done")
		}
		if err := hog.Start(); err != nil {
			t.Fatal(err)
		}
		hogs = append(hogs, hog)
	}
	var nice []string
	if n, err := exec.LookPath("nice"); err == nil {
		nice = []string{n, "-n", "10"}
	}
	b := recUnder(nice, "b")
	for _, hog := range hogs {
		hog.Process.Kill()
		hog.Wait()
	}
	c := rec("c", "--inject", "delay:rank=1,dur=3ms,every=1")

	d := diffJSON(t, a, b)
	if d.Load == nil {
		t.Fatal("the diff does not say how long the ranks waited for a core")
	}
	t.Logf("waited for a core: %.1f%% of each step in A, %.1f%% in B; %d changes within the load", 100*d.Load.AShare, 100*d.Load.BShare, d.Load.Explained)
	if d.Load.BShare < d.Load.AShare+0.05 {
		t.Errorf("with a core kept busy, B's ranks waited %.1f%% of each step, A's %.1f%%: the load is not seen", 100*d.Load.BShare, 100*d.Load.AShare)
	}
	for _, ch := range append(d.Outcomes, d.Changes...) {
		if ch.Verdict == analyze.Better || ch.Verdict == analyze.Worse {
			t.Errorf("same configuration, a core busy in B: %s %v → %v is %s", ch.Metric, ch.A, ch.B, ch.Verdict)
		}
	}
	// The runs differ in their injected faults, so the load is the
	// change's own and explains nothing; on a machine busy before the
	// test began, the runs' own variation may still hide the delay
	// (within noise), never make it better.
	busy := d.Load.AShare > 0.1
	d = diffJSON(t, a, c)
	for _, ch := range d.Outcomes {
		if ch.ID == "time_per_sample" {
			t.Logf("delayed 3 ms a step: time per sample %.0f → %.0f ns, %s (load explains: %v; cores waited for %.1f%% → %.1f%%)",
				ch.A, ch.B, ch.Verdict, ch.LoadExplains, 100*d.Load.AShare, 100*d.Load.BShare)
			switch {
			case ch.Verdict == analyze.Worse:
			case busy && ch.Verdict == analyze.WithinNoise:
			default:
				t.Errorf("a rank delayed 3 ms a step: time per sample %.0f → %.0f ns is %q (load explains: %v), want worse", ch.A, ch.B, ch.Verdict, ch.LoadExplains)
			}
			return
		}
	}
	t.Error("the diff of a delayed run has no time per sample")
}
