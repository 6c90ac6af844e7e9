package analyze

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/trace"
)

// Diff compares two runs' summaries, A the baseline and B the new one.
type Diff struct {
	SchemaVersion int     `json:"schema_version"`
	A             RunInfo `json:"a"`
	B             RunInfo `json:"b"`
	// Basis is what per-run figures are divided by: "step" when both runs
	// have steps, else "run" (totals). PerSample says whether per-sample
	// figures are included (both runs name their batch size).
	Basis     string `json:"basis"`
	PerSample bool   `json:"per_sample"`
	// Title names what differs between the runs' configurations ("batch
	// 64 → 512, lr-scaling none → linear").
	Title string `json:"title"`
	// Outcomes are what the user changed the configuration for, first:
	// throughput, time per epoch, accuracy and time to accuracy, time,
	// communication bytes and exposed communication per sample.
	Outcomes []Change `json:"outcomes"`
	// Changes are every other figure, those that move the time per sample
	// most first (effect), then the rest by weighted relative change.
	Changes []Change       `json:"changes"`
	Config  []ConfigChange `json:"config"` // keys whose values differ
	// Headline is the runs' headline figures side by side (section
	// "headline"), what a page leads with when the diff has no outcomes:
	// step time, throughput, communication, exposed communication, bus
	// bandwidth, arrival wait, test accuracy. Each has the verdict the
	// diff gives the same figure (busbw: its op's), none when it moved by
	// HeadlineNoise or less; a figure the diff lacks is within noise up
	// to UnsampledFloor.
	Headline []Change `json:"headline"`
	// Tests counts the figures with a direction whose spread both runs
	// measured; Level is the confidence of each one's interval, 95% over
	// all of them at once (judgeChanges).
	Tests int     `json:"tests"`
	Level float64 `json:"level"`
	// Load is how long each run's ranks waited for a core; nil when a run
	// did not read it (recorded with --sample off, or imported).
	Load *MachineLoad `json:"load,omitempty"`
}

// MachineLoad is how long the ranks of each run waited for a core (ready
// to run, not running: another process, more ranks than cores), what a
// diff weighs its changes in time against (docs/metrics.md, "The
// machine's load").
type MachineLoad struct {
	// ANS and BNS are the wait summed over the ranks, per step (per run
	// without steps).
	ANS float64 `json:"a_ns"`
	BNS float64 `json:"b_ns"`
	// AShare and BShare are that over the ranks' time: the step time
	// (the sampled time without steps) times the ranks that read it.
	AShare float64 `json:"a_share"`
	BShare float64 `json:"b_share"`
	// Explained counts the changes the load may account for.
	Explained int `json:"explained"`
	// Configured, when set, says the runs' configurations differ in what
	// may load the cores ("injected faults", "ranks per host"): the load
	// is then the change's own, an effect, and explains nothing.
	Configured string `json:"configured,omitempty"`
}

// HeadlineNoise is the relative change of a headline figure (2%) within
// which it gets no verdict: runs of the same program vary that much.
const HeadlineNoise = 0.02

// Change is one figure in both runs.
type Change struct {
	// ID names the figure for programs: stable across versions and runs
	// ("step_time", "op.allreduce.busbw",
	// "collective.allreduce.ring.17.mean_time", "result.loss"), where
	// Metric is its name for people.
	ID string `json:"id"`
	// Def is the slug of the figure's definition in docs/metrics.md and on
	// the pages ("step-time", "busbw"); "" for none.
	Def     string   `json:"def"`
	Section string   `json:"section"` // step, op, collective, skew, fit, result
	Metric  string   `json:"metric"`
	Unit    string   `json:"unit"` // ns, bytes, GB/s, fraction, 1/s, count, ""
	A       float64  `json:"a"`
	B       float64  `json:"b"`
	Delta   float64  `json:"delta"`         // B - A
	Rel     *float64 `json:"rel,omitempty"` // (B - A) / |A|; absent when A is 0
	// Verdict is better or worse when the change is larger than the runs'
	// own variation allows (NoiseRel), "within noise" when a figure with a
	// better direction moved less, and "" for figures without a direction,
	// unchanged, new or gone.
	Verdict string `json:"verdict"`
	// CILow and CIHigh bound Rel at Confidence (95%) given how much the
	// figure varies within each run; absent where that was not measured
	// (NoiseFrom "floor") or Rel is.
	CILow  *float64 `json:"ci_low,omitempty"`
	CIHigh *float64 `json:"ci_high,omitempty"`
	// NoiseRel is the relative change within which the figure gets no
	// verdict: the interval's half-width or the floor (NoiseFloor, or
	// UnsampledFloor without samples), whichever is larger.
	NoiseRel float64 `json:"noise_rel"`
	// NoiseFrom says what the runs' variation was measured over: "steps",
	// "calls" (a collective group's events), "skew" (the world calls'
	// arrival skews), "replay" (the straggler replay's noise floor), or
	// "floor" for figures without samples inside a run.
	NoiseFrom string `json:"noise_from,omitempty"`
	// EffectNS is how much the change moves the time per sample (per
	// step, without batch sizes), ns, signed (positive: B takes longer);
	// 0 for figures that are not step times.
	EffectNS float64 `json:"effect_ns"`
	// LoadExplains says the change is no larger than the machine's load
	// may account for (Diff.Load): its ranks waited for a core longer in
	// one run than in the other. Its verdict is "within noise" though
	// its interval may not hold 0.
	LoadExplains bool `json:"load_explains,omitempty"`

	weight float64 // of the relative change in the ordering
	// What the verdict is given against, once every figure is known
	// (judgeChanges).
	nz noise
	bt better
}

// ConfigChange is one configuration key that differs.
type ConfigChange struct {
	Key string `json:"key"`
	A   string `json:"a"`
	B   string `json:"b"`
}

type better int

const (
	neutral better = iota
	lower
	higher
)

// Compare diffs two summaries. Figures are normalised per step (or per
// run) and per sample so that runs of different lengths, batch sizes or
// rank counts compare.
func Compare(a, b *Summary) *Diff {
	d := &Diff{SchemaVersion: SchemaVersion, A: a.Run, B: b.Run, Basis: "run", Outcomes: []Change{}, Changes: []Change{}, Config: []ConfigChange{},
		Headline: []Change{}}
	steps := a.StepSummary.Steps > 0 && b.StepSummary.Steps > 0
	if steps {
		d.Basis = "step"
	}
	d.PerSample = a.Run.SamplesPerStep > 0 && b.Run.SamplesPerStep > 0 && steps
	// Figures are ordered by their relative change weighted by how much
	// they weigh in the run (magnitude): a time by its share of the step,
	// a fraction by its size, an op's or a collective group's figures by
	// the op's share of the step (of the collective time, without steps).
	// So an idle time of 72 ns per step that became 1.9 µs, or a one-off
	// setup broadcast that became twice as slow, does not outrank a step
	// that became 10% slower.
	weight := 1.0
	// When the batch size changed, per-step times are expected to change:
	// their per-sample versions carry the verdict.
	batchChanged := d.PerSample && a.Run.SamplesPerStep != b.Run.SamplesPerStep
	perStepTime := func() better {
		if batchChanged {
			return neutral
		}
		return lower
	}
	// stepNS is the scale of per-step times: the longer mean step.
	stepNS := math.Max(a.StepSummary.Time.Mean, b.StepSummary.Time.Mean)
	// partOf weighs a figure that is a part of a whole of size whole.
	partOf := func(va, vb, whole float64) float64 {
		if !(whole > 0) {
			return 1
		}
		return math.Min(1, math.Max(math.Abs(va), math.Abs(vb))/whole)
	}
	add := func(id, def, section, metric, unit string, va, vb float64, bt better, nz noise) {
		if va == 0 && vb == 0 || math.IsNaN(va) || math.IsNaN(vb) {
			return
		}
		w := weight
		switch {
		case unit == "fraction":
			w = partOf(va, vb, 1)
		case unit == "ns" && section == "step" && strings.HasSuffix(id, "_per_sample"):
			w = partOf(va, vb, stepNS/float64(max(min(a.Run.SamplesPerStep, b.Run.SamplesPerStep), 1)))
		case unit == "ns" && (section == "step" || section == "skew") && steps:
			w = partOf(va, vb, stepNS)
		}
		c := Change{ID: id, Def: def, Section: section, Metric: metric, Unit: unit, A: va, B: vb, Delta: vb - va, weight: w}
		if unit == "ns" && section == "step" && id != "step_time_p95" && id != "core_wait_per_step" {
			// A per-step time moves the time per sample by its change
			// over the samples of a step; a per-sample one by itself.
			switch {
			case strings.HasSuffix(id, "_per_sample"):
				c.EffectNS = vb - va
			case d.PerSample && id == "compute_per_step":
				// Its per-sample row carries the same effect: one is enough.
			case d.PerSample:
				c.EffectNS = vb/float64(b.Run.SamplesPerStep) - va/float64(a.Run.SamplesPerStep)
			case steps:
				c.EffectNS = vb - va
			}
		}
		if va != 0 {
			r := (vb - va) / math.Abs(va)
			c.Rel = &r
		}
		c.nz, c.bt = nz, bt
		d.Changes = append(d.Changes, c)
	}
	per := func(s *Summary) float64 { // divisor for per-step figures
		if steps {
			return float64(s.StepSummary.Steps)
		}
		return 1
	}
	unitPer := "per " + d.Basis
	// perEpoch says whether calls made ca times in A and cb in B are
	// counted per epoch: less than once every other step in both runs
	// that have steps and epochs.
	perEpoch := func(ca, cb float64) bool {
		return steps && len(a.Epochs) > 0 && len(b.Epochs) > 0 && ca/per(a) < 0.5 && cb/per(b) < 0.5
	}

	// Outcomes: what the configuration was changed for.
	outcome := func(id, def, metric, unit string, va, vb float64, bt better, nz noise) {
		n := len(d.Changes)
		add(id, def, "outcome", metric, unit, va, vb, bt, nz)
		if len(d.Changes) > n {
			d.Outcomes = append(d.Outcomes, d.Changes[n])
			d.Changes = d.Changes[:n]
		}
	}
	// What each figure's verdict is measured against (noise.go): the
	// runs' steps, for figures made of steps.
	fromSteps := func(f func(StepStats) float64) noise {
		return sampled("steps", stepSpread(a, f), stepSpread(b, f))
	}
	fromStepRatio := func(num, den func(StepStats) float64) noise {
		return sampled("steps", stepRatioSpread(a, num, den), stepRatioSpread(b, num, den))
	}
	stepTime := fromSteps(func(s StepStats) float64 { return s.TimeNS })
	accuracy := noise{floorAbs: LostAccuracy}

	// The machine's load (noise.go, loadTerm): each run's ranks' core
	// wait, summed over them, per step (per run) and over the run.
	d.Load = machineLoad(a, b, steps)
	var totalA, totalB float64
	if d.Load != nil && d.Load.Configured == "" {
		totalA, totalB = d.Load.ANS*per(a), d.Load.BNS*per(b)
	}
	// loaded adds to nz the load on a figure of values v (num: a time;
	// den: the time a rate is over) whose unit is 1/ua of a run in A and
	// 1/ub in B (per step: the steps; per call: the calls).
	loaded := func(nz noise, ua, ub float64, num, den [2]float64) noise {
		// The load explains a change only in the run whose ranks waited
		// a larger share of their time: one that waited longer only
		// because it ran longer (a rank delayed on purpose) was no busier.
		if l := d.Load; l != nil && l.Configured == "" && ua > 0 && ub > 0 && (totalB/ub-totalA/ua)*(l.BShare-l.AShare) > 0 {
			nz.load = &loadTerm{s: [2]float64{totalA / ua, totalB / ub}, num: num, den: den}
		}
		return nz
	}
	none := [2]float64{}
	pair := func(va, vb float64) [2]float64 { return [2]float64{va, vb} }
	stepTimes := pair(a.StepSummary.Time.Mean, b.StepSummary.Time.Mean)
	// A figure that scales with the step time (an epoch, the time to an
	// accuracy, the time per sample) may be the load's by the step's
	// share of it.
	stepShare := func(nz noise) noise { return loaded(nz, per(a), per(b), stepTimes, none) }
	stepRate := func(nz noise) noise { return loaded(nz, per(a), per(b), none, stepTimes) }
	perStep := func(nz noise, va, vb float64) noise { return loaded(nz, per(a), per(b), pair(va, vb), none) }
	if steps {
		outcome("throughput", "throughput", "throughput", "samples/s", a.StepSummary.SamplesPerSec, b.StepSummary.SamplesPerSec, higher, stepRate(stepTime))
	}
	// An epoch, and the time to an accuracy, are made of steps: they vary
	// as much as the steps do.
	outcome("epoch_time", "epoch-time", "time per epoch", "ns", meanEpoch(a), meanEpoch(b), lower, stepShare(stepTime))
	outcome("test_accuracy", "accuracy", "test accuracy", "fraction", a.Run.Metrics[trace.MetricTestAccuracy], b.Run.Metrics[trace.MetricTestAccuracy], higher, accuracy)
	if target := min(bestAccuracy(a), bestAccuracy(b)); target > 0 {
		ta, oka := TimeToAccuracy(a.Epochs, target)
		tb, okb := TimeToAccuracy(b.Epochs, target)
		if oka && okb {
			outcome("time_to_accuracy", "time-to-target", fmt.Sprintf("time to %s test accuracy", units.Percent(target, 1)), "ns", float64(ta), float64(tb), lower, stepShare(stepTime))
		}
	}
	if d.PerSample {
		na, nb := float64(a.Run.SamplesPerStep), float64(b.Run.SamplesPerStep)
		sa, sb := a.StepSummary, b.StepSummary
		outcome("time_per_sample", "time-per-sample", "time per sample", "ns", sa.Time.Mean/na, sb.Time.Mean/nb, lower, stepShare(stepTime))
		outcome("comm_bytes_per_sample", "bytes-per-sample", "communication bytes per sample", "bytes", stepBytes(a)/na, stepBytes(b)/nb, lower,
			fromSteps(func(s StepStats) float64 { return s.CommBytes }))
		outcome("exposed_per_sample", "exposed", "exposed communication per sample", "ns", sa.ExposedNS/na, sb.ExposedNS/nb, lower,
			perStep(fromSteps(func(s StepStats) float64 { return s.ExposedNS }), sa.ExposedNS, sb.ExposedNS))
	}

	// Steps and headline.
	if steps {
		sa, sb := a.StepSummary, b.StepSummary
		compute := fromSteps(func(s StepStats) float64 { return s.ComputeNS })
		add("step_time", "step-time", "step", "step time", "ns", sa.Time.Mean, sb.Time.Mean, perStepTime(), stepShare(stepTime))
		add("step_time_p95", "step-time", "step", "step time p95", "ns", float64(sa.Time.P95), float64(sb.Time.P95), perStepTime(),
			perStep(sampled("steps", stepP95Spread(a), stepP95Spread(b)), float64(sa.Time.P95), float64(sb.Time.P95)))
		add("compute_per_step", "compute", "step", "compute per step", "ns", sa.ComputeNS, sb.ComputeNS, perStepTime(), perStep(compute, sa.ComputeNS, sb.ComputeNS))
		add("exposed_per_step", "exposed", "step", "exposed communication per step", "ns", sa.ExposedNS, sb.ExposedNS, perStepTime(),
			perStep(fromSteps(func(s StepStats) float64 { return s.ExposedNS }), sa.ExposedNS, sb.ExposedNS))
		add("overlapped_per_step", "overlapped", "step", "overlapped communication per step", "ns", sa.OverlappedNS, sb.OverlappedNS, neutral,
			fromSteps(func(s StepStats) float64 { return s.OverlappedNS }))
		add("idle_per_step", "idle", "step", "idle per step", "ns", sa.IdleNS, sb.IdleNS, perStepTime(),
			perStep(fromSteps(func(s StepStats) float64 { return s.IdleNS }), sa.IdleNS, sb.IdleNS))
		add("wait_per_step", "wait", "step", "arrival wait per step", "ns", sa.WaitNS, sb.WaitNS, perStepTime(),
			perStep(fromSteps(func(s StepStats) float64 { return s.WaitNS }), sa.WaitNS, sb.WaitNS))
		if d.Load != nil {
			// What the machine's load was, beside what it may explain.
			add("core_wait_per_step", "core-wait", "step", "waiting for a core per step (mean over ranks)", "ns", sa.CoreWaitNS, sb.CoreWaitNS, neutral,
				fromSteps(func(s StepStats) float64 { return s.CoreWaitNS }))
		}
		if d.PerSample {
			na, nb := float64(a.Run.SamplesPerStep), float64(b.Run.SamplesPerStep)
			add("compute_per_sample", "compute", "step", "compute per sample", "ns", sa.ComputeNS/na, sb.ComputeNS/nb, lower,
				loaded(compute, per(a)*na, per(b)*nb, pair(sa.ComputeNS/na, sb.ComputeNS/nb), none))
		}
	}
	// The fractions vary as their parts do over the steps (the headline's
	// figures are over ranks and the run; the steps' ratios measure how
	// much they move).
	comm := func(s StepStats) float64 { return s.ExposedNS + s.OverlappedNS }
	// A fraction of two times may be the load's by its numerator's share,
	// its denominator's, or both.
	commA, commB := a.StepSummary.ExposedNS+a.StepSummary.OverlappedNS, b.StepSummary.ExposedNS+b.StepSummary.OverlappedNS
	fraction := func(nz noise, num, den [2]float64) noise { return loaded(nz, per(a), per(b), num, den) }
	add("comm_fraction", "communication", "step", "communication fraction", "fraction", a.Headline.CommFraction, b.Headline.CommFraction, lower,
		fraction(fromStepRatio(comm, func(s StepStats) float64 { return s.TimeNS }), pair(commA, commB), stepTimes))
	add("exposed_fraction", "exposed", "step", "exposed fraction of communication", "fraction", a.Headline.ExposedFrac, b.Headline.ExposedFrac, lower,
		fraction(fromStepRatio(func(s StepStats) float64 { return s.ExposedNS }, comm), pair(a.StepSummary.ExposedNS, b.StepSummary.ExposedNS), pair(commA, commB)))
	add("wait_fraction", "wait", "step", "arrival wait fraction of communication", "fraction", a.Headline.WaitFraction, b.Headline.WaitFraction, lower,
		fraction(fromStepRatio(func(s StepStats) float64 { return s.WaitNS }, comm), pair(a.StepSummary.WaitNS, b.StepSummary.WaitNS), pair(commA, commB)))

	// Ops.
	opA, opB := map[string]OpStats{}, map[string]OpStats{}
	for _, o := range a.Ops {
		opA[o.Op] = o
	}
	for _, o := range b.Ops {
		opB[o.Op] = o
	}
	for _, op := range unionKeys(opA, opB, strings.Compare) {
		oa, ob := opA[op], opB[op]
		ra, rb := float64(max(len(a.Ranks), 1)), float64(max(len(b.Ranks), 1))
		weight = share(oa.TimeNS, a, ob.TimeNS, b, steps)
		// An op called less than once every other step in both runs (the
		// once-an-epoch evaluation, a barrier) is counted per epoch: per
		// step its time would change with the steps an epoch has, not with
		// what it costs.
		section, pa, pb, unit, bt := "op", per(a), per(b), unitPer, perStepTime()
		if perEpoch(float64(oa.Calls), float64(ob.Calls)) {
			section, pa, pb, unit, bt = "epoch", float64(len(a.Epochs)), float64(len(b.Epochs)), "per epoch", lower
		}
		opTime := ofCalls(opSpread(a, op, false), opSpread(b, op, false))
		ta, tb := float64(oa.TimeNS)/ra/pa, float64(ob.TimeNS)/rb/pb
		callsA, callsB := float64(oa.Calls), float64(ob.Calls)
		add("op."+op+".time", "op-time", section, op+" time "+unit, "ns", ta, tb, bt, loaded(opTime, pa, pb, pair(ta, tb), none))
		add("op."+op+".calls", "calls", section, op+" calls "+unit, "count", float64(oa.Calls)/pa, float64(ob.Calls)/pb, neutral, noise{})
		add("op."+op+".bytes", "coll-bytes", section, op+" bytes "+unit, "bytes", float64(oa.Bytes)/pa, float64(ob.Bytes)/pb, neutral, noise{})
		add("op."+op+".mean_time", "latency", section, op+" mean time per call", "ns", oa.MeanNS, ob.MeanNS, lower,
			loaded(opTime, callsA, callsB, pair(oa.MeanNS, ob.MeanNS), none))
		add("op."+op+".busbw", "busbw", section, op+" busbw", "GB/s", oa.BusBWGBps, ob.BusBWGBps, higher,
			loaded(ofCalls(opSpread(a, op, true), opSpread(b, op, true)), callsA, callsB, none, pair(oa.MeanNS, ob.MeanNS)))
	}

	// Collectives by algorithm and size.
	// Keyed by a group with only its op, algorithm and bucket set.
	key := func(c CollStats) CollStats { return CollStats{Op: c.Op, Algo: c.Algo, Bucket: c.Bucket} }
	ca, cb := map[CollStats]CollStats{}, map[CollStats]CollStats{}
	for _, c := range a.Collectives {
		ca[key(c)] = c
	}
	for _, c := range b.Collectives {
		cb[key(c)] = c
	}
	for _, k := range unionKeys(ca, cb, cmpColl) {
		x, y := ca[k], cb[k]
		name := fmt.Sprintf("%s %s %s", k.Op, k.Algo, units.Bucket(k.Bucket))
		id := fmt.Sprintf("collective.%s.%s.%d", k.Op, k.Algo, k.Bucket)
		weight = share(x.Time.Sum, a, y.Time.Sum, b, steps)
		// A group called less than once every other step in both runs is
		// counted per epoch, as its op is.
		section, pa, pb, unit := "collective", per(a), per(b), unitPer
		if perEpoch(float64(x.Calls), float64(y.Calls)) {
			section, pa, pb, unit = "epoch", float64(len(a.Epochs)), float64(len(b.Epochs)), "per epoch"
		}
		// busbw is bytes per call over the mean time: it varies as that does.
		group := ofCalls(x.TimeSpread, y.TimeSpread)
		cx, cy := float64(x.Calls), float64(y.Calls)
		add(id+".mean_time", "latency", section, name+" mean time", "ns", x.Time.Mean, y.Time.Mean, lower,
			loaded(group, cx, cy, pair(x.Time.Mean, y.Time.Mean), none))
		add(id+".busbw", "busbw", section, name+" busbw", "GB/s", x.BusBWGBps, y.BusBWGBps, higher,
			loaded(group, cx, cy, none, pair(x.Time.Mean, y.Time.Mean)))
		add(id+".calls", "calls", section, name+" calls "+unit, "count", float64(x.Calls)/pa, float64(y.Calls)/pb, neutral, noise{})
	}

	// Memory, CPU and energy (resources.go).
	weight = 1
	addResources(add, a, b, d.PerSample, fromSteps)

	// Skew, fit, results.
	weight = 1
	skewA, skewB := skewSeries(a), skewSeries(b)
	// A call's skew may hold a whole step's (run's) load.
	add("skew_mean", "skew", "skew", "arrival skew mean", "ns", a.Skew.Dist.Mean, b.Skew.Dist.Mean, lower,
		perStep(sampled("skew", BlockSpread(skewA), BlockSpread(skewB)), a.Skew.Dist.Mean, b.Skew.Dist.Mean))
	add("skew_p95", "skew", "skew", "arrival skew p95", "ns", float64(a.Skew.Dist.P95), float64(b.Skew.Dist.P95), lower,
		perStep(sampled("skew", BlockQuantileSpread(skewA, 0.95), BlockQuantileSpread(skewB, 0.95)), float64(a.Skew.Dist.P95), float64(b.Skew.Dist.P95)))
	// The replay names a straggler only above its own noise floor; the
	// share a rank costs varies by that floor's share of the run.
	// A rank the machine keeps off its core is a straggler of the load's
	// making: the share may move by the runs' difference in core wait
	// over the step.
	add("straggler_share", "straggler", "skew", "the costliest straggler's share of the run", "fraction", topShare(a), topShare(b), lower,
		loaded(noise{from: "replay", floorAbs: math.Hypot(replayNoise(a), replayNoise(b))}, per(a), per(b),
			pair(topShare(a)*stepTimes[0], topShare(b)*stepTimes[1]), stepTimes))
	if a.Fit.Usable && b.Fit.Usable {
		// A model without the signal to be shown has nothing to compare.
		// The model is fitted to the calls' times: the load may be in them
		// by its share of the step.
		add("link_gbps", "link", "fit", "link bandwidth (1/beta)", "GB/s", a.Fit.LinkGBps, b.Fit.LinkGBps, higher, stepRate(noise{}))
		add("alpha", "model", "fit", "alpha (per message step)", "ns", a.Fit.AlphaNS, b.Fit.AlphaNS, lower, stepShare(noise{}))
		add("gamma", "model", "fit", "gamma (reduction)", "ns/byte", a.Fit.GammaNSPerB, b.Fit.GammaNSPerB, lower, stepShare(noise{}))
	}
	for _, m := range unionKeys(a.Run.Metrics, b.Run.Metrics, strings.Compare) {
		bt, nz := neutral, noise{}
		switch m {
		case trace.MetricTestAccuracy, trace.MetricTrainAccuracy:
			bt, nz = higher, accuracy
		case trace.MetricImagesPerSecond:
			// The trainer's own throughput, over the same steps.
			bt, nz = higher, stepRate(stepTime)
		case trace.MetricLoss:
			bt = lower
		}
		def := "result"
		if m == trace.MetricTestAccuracy {
			def = "accuracy"
		}
		add("result."+m, def, "result", m, "", a.Run.Metrics[m], b.Run.Metrics[m], bt, nz)
	}
	for _, k := range unionKeys(a.Run.Config, b.Run.Config, strings.Compare) {
		if a.Run.Config[k] != b.Run.Config[k] {
			d.Config = append(d.Config, ConfigChange{Key: k, A: a.Run.Config[k], B: b.Run.Config[k]})
		}
	}
	if ia, ib := strings.Join(a.Run.Injected, "; "), strings.Join(b.Run.Injected, "; "); ia != ib {
		d.Config = append(d.Config, ConfigChange{Key: "injected", A: ia, B: ib})
	}
	if a.Run.WorldSize != b.Run.WorldSize && a.Run.Config[trace.ConfigRanks] == b.Run.Config[trace.ConfigRanks] {
		d.Config = append(d.Config, ConfigChange{Key: "world_size", A: fmt.Sprint(a.Run.WorldSize), B: fmt.Sprint(b.Run.WorldSize)})
	}
	sort.SliceStable(d.Changes, func(i, j int) bool {
		ci, cj := d.Changes[i], d.Changes[j]
		if ei, ej := math.Abs(ci.EffectNS), math.Abs(cj.EffectNS); ei != ej {
			return ei > ej
		}
		return magnitude(ci) > magnitude(cj)
	})
	judgeChanges(d)
	d.Title = title(d.Config)
	d.Headline = headlineChanges(a, b, d)
	if d.Load != nil {
		for _, c := range append(slices.Clone(d.Outcomes), d.Changes...) {
			if c.LoadExplains {
				d.Load.Explained++
			}
		}
	}
	return d
}

// RunToRun is the NoiseFrom of a change judged against its run-to-run
// floor (noise.go, RunFloorStep and RunFloorComm).
const RunToRun = "run to run"

// judgeChanges gives every change its interval and verdict. The diff
// makes one test for each figure with a direction whose spread both runs
// measured, some thirty of them: at 95% each, two runs of one
// configuration would show one or two moved by chance alone. So the
// level is 95% over all of them at once (Bonferroni): each figure's
// interval is at 1 − 5%/m for m such figures.
func judgeChanges(d *Diff) {
	m := 0
	for _, cs := range [][]Change{d.Outcomes, d.Changes} {
		for _, c := range cs {
			if c.bt != neutral && c.Rel != nil && c.nz.measured() {
				m++
			}
		}
	}
	d.Tests = m
	d.Level = 1 - (1-Confidence)/float64(max(m, 1))
	for _, cs := range [][]Change{d.Outcomes, d.Changes} {
		for i := range cs {
			c := &cs[i]
			c.nz.apply(c, d.Level)
			if f := runFloor(*c); c.Rel != nil && f > c.NoiseRel && c.NoiseFrom != "too few calls" {
				c.NoiseRel, c.NoiseFrom = f, RunToRun
			}
			if c.Delta == 0 || c.A == 0 || c.B == 0 {
				continue
			}
			switch {
			case c.bt == neutral:
			case withinNoise(*c):
				c.Verdict = WithinNoise
			case c.bt == lower && c.Delta < 0, c.bt == higher && c.Delta > 0:
				c.Verdict = Better
			default:
				c.Verdict = Worse
			}
		}
	}
}

// machineLoad is how long each run's ranks waited for a core, per step
// (per run without steps); nil unless both runs read it.
func machineLoad(a, b *Summary, steps bool) *MachineLoad {
	of := func(s *Summary) (ns, share float64) {
		r := s.Resources
		if steps {
			ns = s.StepSummary.CoreWaitNS * float64(r.CoreWaitRanks)
			if s.StepSummary.Time.Mean > 0 {
				share = s.StepSummary.CoreWaitNS / s.StepSummary.Time.Mean
			}
			return ns, share
		}
		var sampled int64
		for _, rk := range s.Ranks {
			sampled += rk.SampledNS
		}
		if sampled > 0 {
			share = float64(r.CoreWaitNS) / float64(sampled)
		}
		return float64(r.CoreWaitNS), share
	}
	if a.Resources.CoreWaitRanks == 0 || b.Resources.CoreWaitRanks == 0 {
		return nil
	}
	l := &MachineLoad{}
	l.ANS, l.AShare = of(a)
	l.BNS, l.BShare = of(b)
	perHost := func(s *Summary) float64 { return float64(s.Run.WorldSize) / float64(max(len(s.Run.Hosts), 1)) }
	switch {
	case strings.Join(a.Run.Injected, ";") != strings.Join(b.Run.Injected, ";"):
		// A hog loads a core on purpose; a slow link's shaper and a
		// stall's stopper are processes of their own.
		l.Configured = "injected faults"
	case perHost(a) != perHost(b):
		l.Configured = "ranks per host"
	}
	return l
}

// headlineChanges is the runs' headline figures as changes, with the diff's
// verdicts.
func headlineChanges(a, b *Summary, d *Diff) []Change {
	verdicts := map[string]string{}
	for _, c := range append(slices.Clone(d.Outcomes), d.Changes...) {
		verdicts[c.ID] = c.Verdict
	}
	ha, hb := a.Headline, b.Headline
	busbw := "" // the op the bus bandwidth is of, when the runs agree
	if ha.BusBWOp == hb.BusBWOp && ha.BusBWOp != "" {
		busbw = "op." + ha.BusBWOp + ".busbw"
	}
	out := []Change{}
	for _, f := range []struct {
		id, def, metric, unit string
		va, vb                float64
		bt                    better
		same                  string // the ID of the figure in the diff, "" for none
	}{
		{"headline.step_time", "step-time", "step time", "ns", ha.StepNS, hb.StepNS, lower, "step_time"},
		{"headline.throughput", "throughput", "throughput", "samples/s", ha.SamplesPerSec, hb.SamplesPerSec, higher, "throughput"},
		{"headline.comm_fraction", "communication", "communication", "fraction", ha.CommFraction, hb.CommFraction, lower, "comm_fraction"},
		{"headline.exposed", "exposed", "exposed communication", "ns", ha.ExposedNS, hb.ExposedNS, lower, "exposed_per_step"},
		{"headline.busbw", "busbw", "bus bandwidth", "GB/s", ha.BusBWGBps, hb.BusBWGBps, higher, busbw},
		{"headline.wait_fraction", "wait", "arrival wait", "fraction", ha.WaitFraction, hb.WaitFraction, lower, "wait_fraction"},
		{"headline.test_accuracy", "accuracy", "test accuracy", "fraction", float64(ha.Accuracy), float64(hb.Accuracy), higher, "test_accuracy"},
	} {
		if f.va == 0 && f.vb == 0 || math.IsNaN(f.va) || math.IsNaN(f.vb) {
			continue
		}
		c := Change{ID: f.id, Def: f.def, Section: "headline", Metric: f.metric, Unit: f.unit, A: f.va, B: f.vb, Delta: f.vb - f.va}
		if f.va == 0 {
			out = append(out, c)
			continue
		}
		r := c.Delta / math.Abs(f.va)
		c.Rel = &r
		v, ok := verdicts[f.same]
		switch {
		case math.Abs(r) <= HeadlineNoise || f.vb == 0:
		case ok && f.same != "":
			c.Verdict = v
		case math.Abs(r) <= UnsampledFloor:
			// Not in the diff: a figure without samples.
			c.Verdict = WithinNoise
		case (f.bt == lower) == (r < 0):
			c.Verdict = "better"
		default:
			c.Verdict = "worse"
		}
		out = append(out, c)
	}
	return out
}

// meanEpoch is a run's mean epoch time, 0 without epochs.
func meanEpoch(s *Summary) float64 {
	if len(s.Epochs) == 0 {
		return 0
	}
	var t int64
	for _, e := range s.Epochs {
		t += e.TimeNS
	}
	return float64(t) / float64(len(s.Epochs))
}

// bestAccuracy is the best test accuracy a run reached at an epoch's end.
func bestAccuracy(s *Summary) float64 {
	best := 0.0
	for _, e := range s.Epochs {
		if v := float64(e.TestAccuracy); v > best {
			best = v
		}
	}
	return best
}

// titleKeys are the configuration keys a diff's title names, as users
// call them; keys derived from these (global_batch) are left out.
var titleKeys = []struct{ key, name string }{
	{"program", "program"}, {"model", "model"}, {"data", "data"}, {trace.ConfigBatchSize, "batch"}, {trace.ConfigRanks, "ranks"},
	{"lr", "lr"}, {"lr_scaling", "lr-scaling"}, {"warmup_epochs", "warm-up"}, {"optimizer", "optimizer"},
	{"sync", "sync"}, {"algo", "algo"}, {"bucket_mb", "bucket"}, {"overlap", "overlap"}, {"epochs", "epochs"},
	{"op", "op"}, {"hidden", "hidden"}, {"injected", "injected"},
}

// title names what differs between two configurations.
func title(cfg []ConfigChange) string {
	have := map[string]ConfigChange{}
	for _, c := range cfg {
		have[c.Key] = c
	}
	var parts []string
	for _, k := range titleKeys {
		if c, ok := have[k.key]; ok {
			parts = append(parts, fmt.Sprintf("%s %s → %s", k.name, orDash(c.A), orDash(c.B)))
		}
	}
	if len(parts) == 0 && len(cfg) > 0 {
		c := cfg[0]
		parts = append(parts, fmt.Sprintf("%s %s → %s", c.Key, orDash(c.A), orDash(c.B)))
	}
	if len(parts) == 0 {
		return "same configuration"
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}

// magnitude orders changes: figures in both runs by weighted relative
// change, then the figures that appear or vanish (a new op is listed, but
// does not push the figures that moved off the top).
func magnitude(c Change) float64 {
	if c.Rel == nil || c.B == 0 {
		return -1
	}
	return math.Abs(*c.Rel) * c.weight
}

// share is the larger of two collective times' shares of their runs: of
// the ranks' step time when the runs have steps, else of their collective
// time. Both are summed over ranks.
func share(ta int64, a *Summary, tb int64, b *Summary, steps bool) float64 {
	total := func(s *Summary) float64 {
		var t float64
		if steps {
			t = s.StepSummary.Time.Mean * float64(s.StepSummary.Steps) * float64(max(len(s.Ranks), 1))
		} else {
			for _, o := range s.Ops {
				t += float64(o.TimeNS)
			}
		}
		return math.Max(t, 1)
	}
	return math.Min(1, math.Max(float64(ta)/total(a), float64(tb)/total(b)))
}

// stepBytes is the mean over steps of the collective bytes a rank's
// calls carried in a step: one step's communication, without the calls
// outside steps (the initial broadcast).
func stepBytes(s *Summary) float64 {
	if len(s.Steps) == 0 {
		return 0
	}
	var n float64
	for _, st := range s.Steps {
		n += st.CommBytes
	}
	return n / float64(len(s.Steps))
}

// unionKeys returns the keys of a and b, once each, in order.
func unionKeys[K comparable, V any](a, b map[K]V, order func(K, K) int) []K {
	var out []K
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, order)
	return out
}

// topShare is the share of the run the costliest rank cost, 0 when the
// run was not replayed.
func topShare(s *Summary) float64 {
	if len(s.Stragglers.Ranks) == 0 {
		return 0
	}
	return s.Stragglers.Ranks[0].Share
}
