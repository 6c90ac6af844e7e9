package analyze

import (
	"slices"
	"strings"
	"testing"

	"github.com/commprof/commprof/trace"
)

// epochRun is a one-rank run of 2 epochs of 5 steps of stepNS each: a
// 4 KiB allreduce per step, and at each epoch's end a barrier and an 8-byte
// allreduce (the evaluation's) outside the steps, then the epoch's marks.
func epochRun(stepNS int64) *trace.Run {
	var evs []trace.Event
	seq := int64(0)
	at := int64(0)
	for epoch := range 2 {
		for i := range 5 {
			st := ev(trace.KindStep, 0, "step", at, stepNS)
			st.Step = int32(epoch*5 + i)
			c := coll(0, "allreduce", "ring", seq, at+stepNS/2, stepNS/4, 4096)
			c.Step = st.Step
			evs = append(evs, st, c)
			seq++
			at += stepNS
		}
		evs = append(evs, coll(0, "barrier", "dissemination", seq, at, 1000, 0), coll(0, "allreduce", "ring", seq+1, at+1000, 1000, 8))
		seq += 2
		acc := ev(trace.KindMark, 0, "test_accuracy", at+2000, 0)
		acc.Value = 0.5 + 0.1*float64(epoch)
		evs = append(evs, acc, ev(trace.KindMark, 0, "epoch", at+2000, 0))
		at += 3000
	}
	run := runOf(1, evs...)
	run.Manifest.Config["batch_size"] = "32"
	return run
}

// Ops and collective sizes called less than once every other step are
// counted per epoch, in a section of their own: no per-step calls of the
// evaluation's allreduce or the barrier among the per-step figures.
func TestDiffKeepsEpochsApart(t *testing.T) {
	d := Compare(Summarize(epochRun(1e6)), Summarize(epochRun(2e6)))
	byMetric := map[string]Change{}
	for _, c := range d.Changes {
		byMetric[c.Metric] = c
		perEpoch := strings.Contains(c.Metric, "barrier") || strings.Contains(c.Metric, "8B-16B")
		if perEpoch != (c.Section == "epoch") {
			t.Errorf("%q is in section %q", c.Metric, c.Section)
		}
		if c.Section == "epoch" && (strings.Contains(c.Metric, "per step") || c.EffectNS != 0) {
			t.Errorf("a per-epoch change counted per step: %+v", c)
		}
	}
	for metric, want := range map[string]float64{
		"barrier calls per epoch":                  1,
		"barrier time per epoch":                   1000,
		"barrier dissemination 0B calls per epoch": 1,
		"allreduce ring 8B-16B calls per epoch":    1,
		"allreduce ring 8B-16B mean time":          1000,
		"allreduce ring 4KiB-8KiB calls per step":  1,
		"allreduce ring 4KiB-8KiB mean time":       250_000,
		// 12 calls in 10 steps: the op is called every step, so it is
		// counted per step, its evaluation calls with it.
		"allreduce calls per step": 1.2,
	} {
		if c, ok := byMetric[metric]; !ok || c.A != want {
			t.Errorf("%q: %+v (present %v), want A = %v", metric, c, ok, want)
		}
	}
	for _, metric := range []string{"barrier calls per step", "allreduce ring 8B-16B calls per step", "barrier dissemination 0B calls per step",
		"allreduce ring 4KiB-8KiB calls per epoch", "allreduce calls per epoch"} {
		if c, ok := byMetric[metric]; ok {
			t.Errorf("%q should not be a change: %+v", metric, c)
		}
	}
}

// The headline figures side by side carry the diff's verdict for the same
// figure: a step twice as long for twice the batch has none, with the same
// batch it is worse; busbw, which the diff has per op only, is better
// higher; and a move within HeadlineNoise is none.
func TestDiffHeadline(t *testing.T) {
	sum := func(batch int, step, busbw float64) *Summary {
		s := &Summary{Run: RunInfo{WorldSize: 2, SamplesPerStep: batch}}
		s.StepSummary = StepSummary{Steps: 10, Time: Dist{Mean: step}}
		s.Headline.StepNS, s.Headline.BusBWGBps = step, busbw
		return s
	}
	get := func(d *Diff, metric string) Change {
		t.Helper()
		for _, c := range d.Headline {
			if c.Metric == metric {
				return c
			}
		}
		t.Fatalf("no headline %q in %+v", metric, d.Headline)
		return Change{}
	}
	for _, c := range []struct {
		a, b        *Summary
		step, busbw string
	}{
		{sum(64, 1e6, 1), sum(128, 2e6, 2), "", "better"},
		{sum(64, 1e6, 1), sum(64, 2e6, 0.5), "worse", "worse"},
		{sum(64, 2e6, 1), sum(64, 1e6, 1.01), "better", ""},
		{sum(64, 1e6, 1), sum(64, 1.015e6, 1), "", ""},
	} {
		d := Compare(c.a, c.b)
		if s, b := get(d, "step time"), get(d, "bus bandwidth"); s.Verdict != c.step || b.Verdict != c.busbw || s.Section != "headline" {
			t.Errorf("step %v → %v ns, busbw %v → %v: verdicts %q and %q, want %q and %q", s.A, s.B, b.A, b.B, s.Verdict, b.Verdict, c.step, c.busbw)
		}
	}
}

// loadedRun is epochRun with the rank's samples: its resident memory, and
// its threads' wait for a core rising by wait in every step.
func loadedRun(stepNS, wait int64, injected ...string) *trace.Run {
	run := epochRun(stepNS)
	rk := &run.Ranks[0]
	var total float64
	for _, e := range slices.Clone(rk.Events) {
		if e.Kind != trace.KindStep {
			continue
		}
		for _, at := range []int64{e.Start, e.End()} {
			s := ev(trace.KindSample, 0, SampleSchedWait, at, 0)
			s.Value = total
			m := ev(trace.KindSample, 0, SampleRSS, at, 0)
			m.Value = 1 << 27
			rk.Events = append(rk.Events, s, m)
			if at == e.Start {
				total += float64(wait)
			}
		}
	}
	run.Manifest.Injected = injected
	return run
}

// The machine's load: a run whose ranks waited for a core longer is slower
// by up to that wait without an effect of its own. A step twice as long
// (beyond the run-to-run floor) whose extra time its ranks spent waiting
// for a core is within
// noise (load); the same step with little of its time waited, or slower
// though its ranks waited less, or with the load injected on purpose, is
// worse.
func TestDiffWeighsTheMachineLoad(t *testing.T) {
	base := Summarize(loadedRun(1e6, 10_000))
	if got := base.StepSummary.CoreWaitNS; got < 9_000 || got > 11_000 {
		t.Fatalf("core wait per step %v ns, want 10 µs", got)
	}
	if r := base.Resources; r.CoreWaitRanks != 1 || r.CoreWaitNS != 100_000 {
		t.Fatalf("core wait %d ns over %d ranks, want 100 µs over 1", r.CoreWaitNS, r.CoreWaitRanks)
	}
	for _, tc := range []struct {
		name       string
		a, b       *trace.Run
		verdict    string
		explained  bool
		configured string
	}{
		{"B waited the extra time", loadedRun(1e6, 10_000), loadedRun(2e6, 1_100_000), WithinNoise, true, ""},
		{"B waited a fifth of it", loadedRun(1e6, 10_000), loadedRun(2e6, 200_000), Worse, false, ""},
		{"B waited longer only as it ran longer", loadedRun(1e6, 400_000), loadedRun(2e6, 700_000), Worse, false, ""},
		{"A waited more", loadedRun(1e6, 500_000), loadedRun(2e6, 0), Worse, false, ""},
		{"B faster though it waited more", loadedRun(2e6, 10_000), loadedRun(1e6, 500_000), Better, false, ""},
		{"the load is injected", loadedRun(1e6, 10_000), loadedRun(2e6, 1_100_000, "hog:rank=0"), Worse, false, "injected faults"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Compare(Summarize(tc.a), Summarize(tc.b))
			if d.Load == nil || d.Load.Configured != tc.configured {
				t.Fatalf("load %+v, want configured %q", d.Load, tc.configured)
			}
			found := false
			for _, c := range d.Changes {
				switch c.ID {
				case "step_time":
					found = true
					if c.Verdict != tc.verdict || c.LoadExplains != tc.explained {
						t.Errorf("%s %v → %v: %q (load explains %v), want %q (%v)", c.ID, c.A, c.B, c.Verdict, c.LoadExplains, tc.verdict, tc.explained)
					}
				case "core_wait_per_step":
					if c.Verdict != "" {
						t.Errorf("the core wait has a verdict: %+v", c)
					}
				}
			}
			if !found {
				t.Fatal("no step time")
			}
			if tc.explained != (d.Load.Explained > 0) {
				t.Errorf("%d changes explained by the load", d.Load.Explained)
			}
		})
	}
	// Without the readings in one run the diff cannot weigh the load.
	if d := Compare(Summarize(epochRun(1e6)), Summarize(loadedRun(2e6, 500_000))); d.Load != nil {
		t.Errorf("load %+v from one run's readings", d.Load)
	}
}

// What the load explains: a time that grew by no more than B's extra
// wait, not one that grew more, nor one that fell; a rate whose time
// grew so; a fraction that moved by no more than the extra wait over its
// denominator, either way.
func TestLoadTermExplains(t *testing.T) {
	time := &loadTerm{s: [2]float64{10, 60}, num: [2]float64{100, 150}}
	for _, c := range []struct {
		lo, hi float64
		want   bool
	}{
		{1.4, 1.6, true},   // grew by 40 to 60 ns, the extra wait is 50
		{1.55, 1.7, false}, // grew by at least 55 ns
		{0.5, 0.9, false},  // fell while B waited more
		{0.9, 1.1, false},  // within the runs' own variation: not the load's doing
	} {
		if got := time.explains(c.lo, c.hi); got != c.want {
			t.Errorf("time, ratio %v-%v: explains %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
	if l := (&loadTerm{s: [2]float64{60, 10}, num: [2]float64{100, 150}}); l.explains(1.4, 1.6) || !l.explains(0.6, 0.7) {
		t.Error("with A waiting more, a fall by up to the difference is explained, a rise is not")
	}
	rate := &loadTerm{s: [2]float64{0, 50}, den: [2]float64{100, 150}}
	if !rate.explains(0.65, 0.75) || rate.explains(0.5, 0.6) || rate.explains(1.2, 1.3) {
		t.Error("a rate over a time that grew by up to 50 ns of 100")
	}
	frac := &loadTerm{s: [2]float64{0, 10}, num: [2]float64{20, 30}, den: [2]float64{100, 100}}
	if !frac.explains(1.3, 1.5) || !frac.explains(0.4, 0.6) || frac.explains(1.6, 1.8) {
		t.Error("a fraction of 0.2 moved by up to 0.1 either way")
	}
	var none *loadTerm
	if none.explains(2, 3) {
		t.Error("no load explains")
	}
}
