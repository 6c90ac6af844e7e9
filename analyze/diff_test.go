package analyze

import (
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
