package analyze

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/commprof/commprof/trace"
)

// sweepSpec is a run of a sweep as its summary reads: its configuration,
// its test accuracy at each epoch's end (epochs of epochNS each), its
// throughput, and per step the collective bytes and exposed
// communication of 10 steps.
type sweepSpec struct {
	ranks, batch int
	rule, warm   string
	acc          []float64
	epochNS      int64
	sps          float64
	stepBytes    float64
	exposedNS    float64
	busbw        float64
	status       string // "" for complete
}

func (sp sweepSpec) run(dir string) SweepRun {
	s := &Summary{Run: RunInfo{Dir: dir, Status: trace.StatusComplete, WorldSize: sp.ranks, SamplesPerStep: sp.batch * sp.ranks,
		Config: map[string]string{"batch_size": strconv.Itoa(sp.batch), "lr_scaling": sp.rule, "warmup_epochs": sp.warm, "lr": "0.01"}}}
	if sp.status != "" {
		s.Run.Status = sp.status
	}
	for i, a := range sp.acc {
		s.Epochs = append(s.Epochs, Epoch{Epoch: i + 1, EndNS: int64(i+1) * sp.epochNS, TimeNS: sp.epochNS, TestAccuracy: trace.Number(a)})
	}
	s.StepSummary = StepSummary{Steps: 10, SamplesPerSec: sp.sps, ExposedNS: sp.exposedNS}
	for i := range 10 {
		s.Steps = append(s.Steps, StepStats{Step: i, CommBytes: sp.stepBytes})
	}
	s.Headline.BusBWGBps = sp.busbw
	return SweepRun{Dir: dir, Summary: s}
}

func findConfig(t *testing.T, sw *Sweep, ranks, batch int, rule, warm string) SweepConfig {
	t.Helper()
	for _, c := range sw.Configs {
		if c.Ranks == ranks && c.BatchSize == batch && c.LRScaling == rule && c.Warmup == warm {
			return c
		}
	}
	t.Fatalf("no configuration of %d ranks, batch %d, %s, warm-up %s in %+v", ranks, batch, rule, warm, sw.Configs)
	return SweepConfig{}
}

// Repeats: a configuration's figures are the mean, min and max over the
// repeats that completed; the time to target is over those that reached
// it, and Reached counts them.
func TestSweepRepeats(t *testing.T) {
	base := sweepSpec{ranks: 2, batch: 32, rule: "none", warm: "0", epochNS: 1e9, sps: 1000, stepBytes: 6400, exposedNS: 640, busbw: 1}
	r1, r2, r3 := base, base, base
	r1.acc, r1.sps, r1.busbw = []float64{0.80, 0.90}, 1000, 1
	r2.acc, r2.sps, r2.busbw, r2.epochNS = []float64{0.85, 0.86}, 3000, 3, 3e9
	r3.acc, r3.status = []float64{0.5}, trace.StatusFailed
	sw := NewSweep([]SweepRun{r1.run("a"), r2.run("b"), r3.run("c")}, 0.87, nil, 0)
	if len(sw.Configs) != 1 {
		t.Fatalf("%d configurations, want 1", len(sw.Configs))
	}
	c := sw.Configs[0]
	if !slices.Equal(c.Runs, []string{"a", "b", "c"}) || c.Failed != 1 || c.GlobalBatch != 64 || c.Group != "lr none" {
		t.Errorf("runs %v, %d failed, global batch %d, group %q", c.Runs, c.Failed, c.GlobalBatch, c.Group)
	}
	want := func(name string, got Range, mean, lo, hi float64, n int) {
		t.Helper()
		if math.Abs(got.Mean-mean) > 1e-9 || got.Min != lo || got.Max != hi || got.N != n {
			t.Errorf("%s: %+v, want mean %v, %v–%v over %d", name, got, mean, lo, hi, n)
		}
	}
	want("accuracy", c.Accuracy, 0.88, 0.86, 0.90, 2)
	want("samples/s", c.SamplesPerSec, 2000, 1000, 3000, 2)
	want("epoch", c.EpochNS, 2e9, 1e9, 3e9, 2)
	want("busbw", c.BusBWGBps, 2, 1, 3, 2)
	// 6400 bytes and 640 ns per step of 64 samples.
	want("bytes per sample", c.CommBytesPerSample, 100, 100, 100, 2)
	want("exposed per sample", c.ExposedNSPerSample, 10, 10, 10, 2)
	// Only the first repeat reached 0.87, at its second epoch's end.
	if c.Reached != 1 {
		t.Errorf("reached in %d repeats, want 1", c.Reached)
	}
	want("time to target", c.TimeToTargetNS, 2e9, 2e9, 2e9, 1)
	if len(c.EpochAccuracy) != 2 || math.Abs(c.EpochAccuracy[0]-0.825) > 1e-9 || math.Abs(c.EpochAccuracy[1]-0.88) > 1e-9 {
		t.Errorf("accuracy per epoch %v, want the repeats' means [0.825 0.88]", c.EpochAccuracy)
	}
	// One rank count: no scaling to speak of.
	if c.ScalingEfficiency != 0 {
		t.Errorf("scaling efficiency %v with one rank count", c.ScalingEfficiency)
	}
	if sw.BestAccuracy == nil || *sw.BestAccuracy != 0 || sw.FastestToTarget == nil || sw.NoRule != nil {
		t.Errorf("picks %v %v, no rule %+v", sw.BestAccuracy, sw.FastestToTarget, sw.NoRule)
	}
}

// Rules and warm-ups: each is a configuration and a line of its own,
// ordered from the smallest learning rate at a large batch to the
// largest; the largest batch's loss without a rule is the verdict, and
// the findings say what each rule kept.
func TestSweepRulesAndFindings(t *testing.T) {
	mk := func(batch int, rule, warm string, acc float64) SweepRun {
		sp := sweepSpec{ranks: 4, batch: batch, rule: rule, warm: warm, acc: []float64{acc}, epochNS: 1e9, sps: float64(batch) * 100}
		return sp.run(fmt.Sprintf("r4-bs%d-lr%s-wu%s", batch, rule, warm))
	}
	sw := NewSweep([]SweepRun{
		mk(512, "linear", "1", 0.83), mk(16, "linear", "1", 0.86),
		mk(512, "linear", "0", 0.84), mk(16, "linear", "0", 0.87),
		mk(512, "sqrt", "0", 0.85), mk(16, "sqrt", "0", 0.87),
		mk(512, "none", "0", 0.81), mk(16, "none", "0", 0.87),
	}, 0.85, nil, 0)
	var order []string
	for _, c := range sw.Configs {
		order = append(order, fmt.Sprintf("%s/%d", c.Group, c.BatchSize))
	}
	if want := []string{"lr none/16", "lr none/512", "lr sqrt/16", "lr sqrt/512", "lr linear/16", "lr linear/512",
		"lr linear, warm-up 1/16", "lr linear, warm-up 1/512"}; !slices.Equal(order, want) {
		t.Errorf("configurations %q, want %q", order, want)
	}
	e := sw.NoRule
	if e == nil || sw.Configs[e.Smallest].GlobalBatch != 64 || sw.Configs[e.Largest].GlobalBatch != 2048 ||
		math.Abs(e.AccuracyChange+0.06) > 1e-9 || e.Verdict != "worse" {
		t.Fatalf("no rule: %+v", e)
	}
	for _, want := range []string{
		"at global batch 2048, lr none reaches 81% test accuracy (-6.0 points against batch 64 without a rule)",
		"at global batch 2048, lr sqrt reaches 85% test accuracy (-2.0 points against batch 64 without a rule)",
		"at global batch 2048, lr linear, warm-up 1 reaches 83% test accuracy (-4.0 points against batch 64 without a rule)",
		"of the learning-rate rules, lr sqrt keeps the most accuracy at global batch 2048: 85%",
	} {
		if !slices.Contains(sw.Findings, want) {
			t.Errorf("findings lack %q:\n%q", want, sw.Findings)
		}
	}
	// Ties go to the first: 0.87 at batch 16, none.
	if i := sw.BestAccuracy; i == nil || sw.Configs[*i].LRScaling != "none" || sw.Configs[*i].BatchSize != 16 {
		t.Errorf("best accuracy %v", i)
	}
	if i := sw.HighestThroughput; i == nil || sw.Configs[*i].BatchSize != 512 {
		t.Errorf("highest throughput %v", i)
	}
	// Only batch 16 of none, sqrt and linear reached 0.85 in 1s, and
	// sqrt's 512: every one at 1s, the first wins.
	if i := sw.FastestToTarget; i == nil || *i != 0 {
		t.Errorf("fastest to target %v", i)
	}
	// A loss of less than half a point is no verdict.
	sw = NewSweep([]SweepRun{mk(16, "none", "0", 0.870), mk(512, "none", "0", 0.866)}, 0.85, nil, 0)
	if sw.NoRule == nil || sw.NoRule.Verdict != "" {
		t.Errorf("a 0.4-point loss: %+v", sw.NoRule)
	}
}

// Scaling efficiency is against the same batch and rule at the smallest
// rank count, which is its own base (1).
func TestSweepScaling(t *testing.T) {
	mk := func(ranks int, sps float64) SweepRun {
		sp := sweepSpec{ranks: ranks, batch: 32, rule: "none", warm: "0", acc: []float64{0.9}, epochNS: 1e9, sps: sps}
		return sp.run(fmt.Sprintf("r%d", ranks))
	}
	sw := NewSweep([]SweepRun{mk(4, 2400), mk(1, 1000), mk(2, 1500)}, 0.85, nil, 0)
	for ranks, want := range map[int]float64{1: 1, 2: 0.75, 4: 0.6} {
		if c := findConfig(t, sw, ranks, 32, "none", "0"); math.Abs(c.ScalingEfficiency-want) > 1e-9 {
			t.Errorf("%d ranks: scaling efficiency %v, want %v", ranks, c.ScalingEfficiency, want)
		}
	}
	if c := findConfig(t, sw, 2, 32, "none", "0"); c.Group != "2 ranks, lr none" {
		t.Errorf("group %q: the ranks vary, so they name the line", c.Group)
	}
}

// With several rank counts, each line's largest batch is set against the
// smallest batch without a rule on its own ranks, and the rules are
// compared at the largest batch they ran.
func TestSweepFindingsByRanks(t *testing.T) {
	mk := func(ranks, batch int, rule string, acc float64) SweepRun {
		sp := sweepSpec{ranks: ranks, batch: batch, rule: rule, warm: "0", acc: []float64{acc}, epochNS: 1e9, sps: 1000}
		return sp.run(fmt.Sprintf("r%d-bs%d-%s", ranks, batch, rule))
	}
	sw := NewSweep([]SweepRun{
		mk(1, 16, "none", 0.90), mk(1, 64, "none", 0.80), mk(1, 64, "sqrt", 0.99),
		mk(2, 16, "none", 0.95), mk(2, 64, "none", 0.70), mk(2, 64, "sqrt", 0.85),
	}, 0.8, nil, 0)
	for _, want := range []string{
		"at global batch 64, 1 rank, lr none reaches 80% test accuracy (-10.0 points against batch 16 without a rule)",
		"at global batch 128, 2 ranks, lr none reaches 70% test accuracy (-25.0 points against batch 32 without a rule)",
		"at global batch 128, 2 ranks, lr sqrt reaches 85% test accuracy (-10.0 points against batch 32 without a rule)",
		"of the learning-rate rules, 2 ranks, lr sqrt keeps the most accuracy at global batch 128: 85%",
	} {
		if !slices.Contains(sw.Findings, want) {
			t.Errorf("findings lack %q:\n%q", want, sw.Findings)
		}
	}
}

// With a usable model, each configuration's allreduces per step are
// projected to the sweep's rank count with the ring formula
// 2(p−1)α + 2((p−1)/p)nβ + ((p−1)/p)nγ; without one, nothing is.
func TestSweepProjection(t *testing.T) {
	sp := sweepSpec{ranks: 4, batch: 32, rule: "none", warm: "0", acc: []float64{0.9}, epochNS: 1e9, sps: 1000}
	r := sp.run("r4")
	const n = 1 << 20
	r.Summary.stepCalls = []callSize{{Op: "allreduce", Algo: "ring", Bytes: n, PerStep: 2}, {Op: "allreduce", Algo: "ring", Bytes: 64, PerStep: 0.1}}
	fit := Fit{Usable: true, AlphaNS: 1000, BetaNSPerB: 0.1, GammaNSPerB: 0.01, Source: "model.json"}
	sw := NewSweep([]SweepRun{r}, 0.85, &fit, 128)
	p := 128.0
	ring := 2*(p-1)*1000 + 2*(p-1)/p*n*0.1 + (p-1)/p*n*0.01
	// The call made once every ten steps is set-up, not the step's.
	if got := sw.Configs[0].ProjectedStepNS; math.Abs(got-2*ring) > 1e-6*ring || sw.ProjectRanks != 128 || sw.Model != "model.json" {
		t.Errorf("projected %v ns at %d ranks from %q, want %v", got, sw.ProjectRanks, sw.Model, 2*ring)
	}
	fit.Usable = false
	if sw := NewSweep([]SweepRun{r}, 0.85, &fit, 128); sw.ProjectRanks != 0 || sw.Configs[0].ProjectedStepNS != 0 {
		t.Errorf("an unusable model projected: %+v", sw)
	}
}

// With repeats, a configuration is the highest throughput only when its
// range over its repeats separates from every other's; with one run each,
// the sweep says it cannot tell noise from an effect.
func TestSweepPicksOnlyRangesThatSeparate(t *testing.T) {
	run := func(batch int, sps float64, name string) SweepRun {
		s := sweepSpec{ranks: 2, batch: batch, rule: "none", warm: "0", epochNS: 1e9, sps: sps, stepBytes: 6400, exposedNS: 640, busbw: 1,
			acc: []float64{0.8, 0.9}}
		return s.run(name)
	}
	// Batch 64: 1000, 1100, 5000 samples/s (median 1100); batch 32: 1200,
	// 1300, 1250 (median 1250): the ranges overlap.
	sw := NewSweep([]SweepRun{run(64, 1000, "a1"), run(64, 1100, "a2"), run(64, 5000, "a3"),
		run(32, 1200, "b1"), run(32, 1300, "b2"), run(32, 1250, "b3")}, 0.85, nil, 0)
	if sw.Repeats != 3 || sw.Noise != "" {
		t.Errorf("repeats %d, noise %q", sw.Repeats, sw.Noise)
	}
	for _, c := range sw.Configs {
		if want := map[int]float64{32: 1250, 64: 1100}[c.BatchSize]; c.SamplesPerSec.Median != want {
			t.Errorf("batch %d: median %v, want %v", c.BatchSize, c.SamplesPerSec.Median, want)
		}
	}
	if sw.HighestThroughput != nil || !slices.ContainsFunc(sw.Findings, func(f string) bool { return strings.Contains(f, "highest throughput") }) {
		t.Errorf("overlapping ranges: highest throughput %v, findings %q", sw.HighestThroughput, sw.Findings)
	}
	// Batch 64 at 2000..2200 clears batch 32's 1200..1300.
	sw = NewSweep([]SweepRun{run(64, 2000, "a1"), run(64, 2100, "a2"), run(64, 2200, "a3"),
		run(32, 1200, "b1"), run(32, 1300, "b2"), run(32, 1250, "b3")}, 0.85, nil, 0)
	if i := sw.HighestThroughput; i == nil || sw.Configs[*i].BatchSize != 64 {
		t.Errorf("separate ranges: highest throughput %v", i)
	}
	sw = NewSweep([]SweepRun{run(64, 2000, "a1"), run(32, 1200, "b1")}, 0.85, nil, 0)
	if sw.Repeats != 1 || !strings.Contains(sw.Noise, "cannot tell run-to-run noise from an effect") || !strings.Contains(sw.Noise, "--repeat 3") {
		t.Errorf("one run each: repeats %d, noise %q", sw.Repeats, sw.Noise)
	}
}
