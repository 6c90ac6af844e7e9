package main

// Truth tests: figures of recorded runs checked against a truth known
// from outside the analyzer — faults injected on purpose, figures
// recomputed here from the raw events by other means, a benchmark's own
// table — under the conditions users have: 4 ranks on a machine with
// fewer cores, and GOMAXPROCS 1. The margins are relations, not clocks:
// these tests assert no wall-clock time. docs/benchmarks.md records what
// each measured.

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/bench"
	"github.com/commprof/commprof/trace"
)

// truthTrain records the reference trainer on 4 ranks with a small data
// set (31 steps of batch 64) and extra arguments.
func truthTrain(t *testing.T, dir string, env []string, record []string, train ...string) (*analyze.Summary, *trace.Run) {
	t.Helper()
	args := append([]string{"record", "--ranks", "4", "--out", dir}, record...)
	args = append(args, "--", "train", "--epochs", "1", "--synthetic-size", "8000")
	args = append(args, train...)
	r := commprof(t, env, args...)
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	return statsJSON(t, dir), run
}

// oversubscribed says what the test conditions are, for the log.
func oversubscribed(t *testing.T) {
	t.Logf("%d ranks on %d cores", 4, runtime.NumCPU())
}

// TestTruthCollectiveEndsWithItsMessages: in the default training run,
// with ranks outnumbering cores, a collective's recorded end is within
// a millisecond of its last message's end (median) and five (p90).
func TestTruthCollectiveEndsWithItsMessages(t *testing.T) {
	oversubscribed(t)
	_, run := truthTrain(t, filepath.Join(t.TempDir(), "r"), nil, nil)
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

// TestTruthExposedAndOverlapped: per-step exposed and overlapped time
// equal the sweep's over the raw events, with overlap on (the default)
// and off; with overlap off nothing is overlapped.
func TestTruthExposedAndOverlapped(t *testing.T) {
	oversubscribed(t)
	for _, overlap := range []string{"true", "false"} {
		t.Run("overlap="+overlap, func(t *testing.T) {
			s, run := truthTrain(t, filepath.Join(t.TempDir(), "r"), []string{"GOMAXPROCS=1"}, nil, "--overlap="+overlap, "--bucket-mb", "0.25")
			exp, ovl := checkStepsByHand(t, s, run)
			t.Logf("overlap=%s: exposed %.3g ns, overlapped %.3g ns over %d steps", overlap, exp, ovl, len(s.Steps))
			if overlap == "false" {
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

// delayedInSteps sums the delays rank r recorded inside its training
// steps (set-up and evaluation calls are outside them).
func delayedInSteps(run *trace.Run, r int) (ns float64) {
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
			if e.Kind != trace.KindMark || e.Name != "inject.delay" {
				continue
			}
			for _, st := range steps {
				if e.Start >= st[0] && e.Start < st[1] {
					ns += e.Value
				}
			}
		}
	}
	return ns
}

// lateBeyondOthers recomputes from the raw arrivals how much of rank r's
// lateness others could not hide: over the world collectives it came last
// to, its arrival minus the next latest rank's. Removing r's delays can
// save no more than this, and saves about this.
func lateBeyondOthers(run *trace.Run, r int) (ns float64) {
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
		next := int64(math.MinInt64)
		for q, t := range a {
			if q != r {
				next = max(next, t)
			}
		}
		if t, ok := a[r]; ok && t > next {
			ns += float64(t - next)
		}
	}
	return ns
}

// TestTruthStragglers: a rank held back 20 ms before every collective is
// named, whichever rank it is, and the time it cost is recovered within
// 30% of the delays it recorded inside steps and within 15% of its
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
			injected, late := delayedInSteps(run, r), lateBeyondOthers(run, r)
			if len(s.Run.Injected) != 1 || s.Run.Injected[0] != spec || injected < 20e6*float64(len(s.Steps)) {
				t.Fatalf("injected %v, delays recorded in steps %.0f ns", s.Run.Injected, injected)
			}
			if len(st.Named) == 0 || st.Named[0] != r || s.Headline.Straggler != r {
				t.Fatalf("named %v (headline %d), want rank %d first: %+v", st.Named, s.Headline.Straggler, r, st.Ranks)
			}
			cost := float64(st.Ranks[0].CostNS)
			t.Logf("rank %d: cost %.3fs; injected in steps %.3fs (%.0f%%), late beyond the others %.3fs (%.0f%%); in %d of %d steps; replay error %d ns",
				r, cost/1e9, injected/1e9, 100*cost/injected, late/1e9, 100*cost/late, st.Ranks[0].Windows, st.Windows, st.ReplayErrorNS)
			if cost < 0.7*injected || cost > 1.3*injected {
				t.Errorf("rank %d's cost %.0f ns is not within 30%% of the %.0f ns injected", r, cost, injected)
			}
			if math.Abs(cost-late) > 0.15*late {
				t.Errorf("rank %d's cost %.0f ns is not within 15%% of its lateness beyond the others, %.0f ns", r, cost, late)
			}
			if st.ReplayErrorNS > 1000 {
				t.Errorf("the replay of the recorded run is off by %d ns", st.ReplayErrorNS)
			}
		})
	}
	t.Run("two", func(t *testing.T) {
		s, _ := truthTrain(t, filepath.Join(t.TempDir(), "r"), nil,
			[]string{"--inject", "delay:rank=1,dur=20ms,every=1", "--inject", "delay:rank=3,dur=20ms,every=1"})
		named := slices.Sorted(slices.Values(s.Stragglers.Named))
		if !slices.Equal(named, []int{1, 3}) {
			t.Fatalf("named %v, want ranks 1 and 3: %+v", s.Stragglers.Named, s.Stragglers.Ranks)
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
// at no more than its cap.
func TestTruthSlowLink(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	r := commprof(t, nil, "record", "--ranks", "4", "--out", dir, "--inject", "link:from=0,to=1,rate=20MB/s", "--",
		"bench", "allreduce", "--algo", "ring", "--min", "1M", "--max", "1M", "--iters", "5", "--warmup", "1")
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	s := statsJSON(t, dir)
	m := s.Matrix
	bw := func(a, b int) float64 { return float64(m.Bytes[a][b]) / float64(m.SendNS[a][b]) }
	slow := bw(0, 1)
	t.Logf("edge 0→1: %.4f GB/s (cap 0.02); 1→2 %.4f, 2→3 %.4f, 3→0 %.4f", slow, bw(1, 2), bw(2, 3), bw(3, 0))
	if slow > 0.02*1.05 {
		t.Errorf("edge 0→1 moved %.4f GB/s over a link capped at 0.02", slow)
	}
	for _, e := range [][2]int{{1, 2}, {2, 3}, {3, 0}} {
		if b := bw(e[0], e[1]); b < 2*slow {
			t.Errorf("edge %d→%d at %.4f GB/s is not clearly faster than the capped 0→1 (%.4f)", e[0], e[1], b, slow)
		}
	}
}

// TestTruthBenchBusbw: a recorded bench run's busbw per size in stats is
// the benchmark's own table's, within 2%.
func TestTruthBenchBusbw(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	r := commprof(t, nil, "record", "--ranks", "4", "--out", dir, "--", "bench", "allreduce", "--min", "64K", "--max", "4M", "--json")
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var rows []bench.Result
	if err := jsonPrefix(r.stdout, &rows); err != nil || len(rows) != 4 {
		t.Fatalf("bench JSON: %v %d rows\n%s", err, len(rows), r.stdout)
	}
	s := statsJSON(t, dir)
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
		t.Logf("%8d B: bench %.4f GB/s, stats %.4f", row.Bytes, row.BusBW, got.BusBWGBps)
		if math.Abs(got.BusBWGBps-row.BusBW) > 0.02*row.BusBW || got.Calls != 20 {
			t.Errorf("%d bytes: stats busbw %.4f over %d calls, bench's table %.4f over 20", row.Bytes, got.BusBWGBps, got.Calls, row.BusBW)
		}
	}
}

// jsonPrefix decodes the JSON value at the start of s (record prints its
// own lines after the program's output).
func jsonPrefix(s string, v any) error {
	return json.NewDecoder(strings.NewReader(s)).Decode(v)
}

// TestTruthCalibratedModel: `commprof calibrate` on 2 and 4 ranks of
// this machine predicts a held-out 3-rank bench (other algorithms, a
// fold to a power of two, 1.5 ranks per core) with a median error within
// 35% over the sizes from 256 KiB.
func TestTruthCalibratedModel(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.json")
	r := commprof(t, nil, "calibrate", "--ranks", "2,4", "--min", "64K", "--max", "8M", "--factor", "2", "--iters", "10", "-o", model)
	if r.code != 0 {
		t.Fatalf("calibrate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Log(strings.TrimSpace(r.stdout))
	held := filepath.Join(dir, "three")
	if r := commprof(t, nil, "record", "--ranks", "3", "--out", held, "--", "bench", "allreduce", "--min", "256K", "--max", "8M", "--factor", "2", "--iters", "10"); r.code != 0 {
		t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = commprof(t, nil, "predict", held, "--model", model, "--ranks", "3", "--check", held, "--format", "json")
	var p predictResult
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || r.code != 0 || p.Check == nil {
		t.Fatalf("predict: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	var errs []float64
	for _, c := range p.Check.Calls {
		e := (c.ModeledNS - c.MeasuredNS) / c.MeasuredNS
		t.Logf("3 ranks, %8d B %-12s: measured %.0f ns, predicted %.0f (%+.0f%%)", c.Bytes, c.Algo, c.MeasuredNS, c.ModeledNS, 100*e)
		errs = append(errs, math.Abs(e))
	}
	slices.Sort(errs)
	med := errs[(len(errs)-1)/2]
	t.Logf("median error %.0f%% over %d sizes", 100*med, len(errs))
	if len(errs) < 5 || med > 0.35 {
		t.Errorf("median error %.0f%% over %d sizes, want at most 35%%", 100*med, len(errs))
	}
}
