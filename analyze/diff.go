package analyze

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Diff compares two runs' summaries, A the baseline and B the new one.
type Diff struct {
	SchemaVersion int     `json:"schema_version"`
	A             RunInfo `json:"a"`
	B             RunInfo `json:"b"`
	// Basis is what per-run figures are divided by: "step" when both runs
	// have steps, else "run" (totals). PerSample says whether per-sample
	// figures are included (both runs name their batch size).
	Basis     string         `json:"basis"`
	PerSample bool           `json:"per_sample"`
	Changes   []Change       `json:"changes"` // largest weighted relative change first (magnitude)
	Config    []ConfigChange `json:"config"`  // keys whose values differ
}

// Change is one figure in both runs.
type Change struct {
	Section string   `json:"section"` // step, op, collective, skew, fit, result
	Metric  string   `json:"metric"`
	Unit    string   `json:"unit"` // ns, bytes, GB/s, fraction, 1/s, count, ""
	A       float64  `json:"a"`
	B       float64  `json:"b"`
	Delta   float64  `json:"delta"`         // B - A
	Rel     *float64 `json:"rel,omitempty"` // (B - A) / |A|; absent when A is 0
	Verdict string   `json:"verdict"`       // better, worse or "" (neutral, unchanged, new or gone)

	weight float64 // of the relative change in the ordering
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
	d := &Diff{SchemaVersion: SchemaVersion, A: a.Run, B: b.Run, Basis: "run", Changes: []Change{}, Config: []ConfigChange{}}
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
	add := func(section, metric, unit string, va, vb float64, bt better) {
		if va == 0 && vb == 0 || math.IsNaN(va) || math.IsNaN(vb) {
			return
		}
		w := weight
		switch {
		case unit == "fraction":
			w = partOf(va, vb, 1)
		case unit == "ns" && section == "step" && strings.HasSuffix(metric, " per sample"):
			w = partOf(va, vb, stepNS/float64(max(min(a.Run.SamplesPerStep, b.Run.SamplesPerStep), 1)))
		case unit == "ns" && (section == "step" || section == "skew") && steps:
			w = partOf(va, vb, stepNS)
		}
		c := Change{Section: section, Metric: metric, Unit: unit, A: va, B: vb, Delta: vb - va, weight: w}
		if va != 0 {
			r := (vb - va) / math.Abs(va)
			c.Rel = &r
		}
		if c.Delta != 0 && va != 0 && vb != 0 {
			switch {
			case bt == lower && c.Delta < 0, bt == higher && c.Delta > 0:
				c.Verdict = "better"
			case bt != neutral:
				c.Verdict = "worse"
			}
		}
		d.Changes = append(d.Changes, c)
	}
	per := func(s *Summary) float64 { // divisor for per-step figures
		if steps {
			return float64(s.StepSummary.Steps)
		}
		return 1
	}
	unitPer := "per " + d.Basis

	// Steps and headline.
	if steps {
		sa, sb := a.StepSummary, b.StepSummary
		add("step", "step time", "ns", sa.Time.Mean, sb.Time.Mean, perStepTime())
		add("step", "step time p95", "ns", float64(sa.Time.P95), float64(sb.Time.P95), perStepTime())
		add("step", "compute per step", "ns", sa.ComputeNS, sb.ComputeNS, perStepTime())
		add("step", "exposed communication per step", "ns", sa.ExposedNS, sb.ExposedNS, perStepTime())
		add("step", "overlapped communication per step", "ns", sa.OverlappedNS, sb.OverlappedNS, neutral)
		add("step", "idle per step", "ns", sa.IdleNS, sb.IdleNS, perStepTime())
		add("step", "arrival wait per step", "ns", sa.WaitNS, sb.WaitNS, perStepTime())
		add("step", "throughput", "samples/s", sa.SamplesPerSec, sb.SamplesPerSec, higher)
		if d.PerSample {
			na, nb := float64(a.Run.SamplesPerStep), float64(b.Run.SamplesPerStep)
			add("step", "time per sample", "ns", sa.Time.Mean/na, sb.Time.Mean/nb, lower)
			add("step", "exposed communication per sample", "ns", sa.ExposedNS/na, sb.ExposedNS/nb, lower)
			add("step", "communication bytes per sample", "bytes", commBytes(a)/per(a)/na, commBytes(b)/per(b)/nb, lower)
		}
	}
	add("step", "communication fraction", "fraction", a.Headline.CommFraction, b.Headline.CommFraction, lower)
	add("step", "exposed fraction of communication", "fraction", a.Headline.ExposedFrac, b.Headline.ExposedFrac, lower)
	add("step", "arrival wait fraction of communication", "fraction", a.Headline.WaitFraction, b.Headline.WaitFraction, lower)

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
		add("op", op+" time "+unitPer, "ns", float64(oa.TimeNS)/ra/per(a), float64(ob.TimeNS)/rb/per(b), perStepTime())
		add("op", op+" calls "+unitPer, "count", float64(oa.Calls)/per(a), float64(ob.Calls)/per(b), neutral)
		add("op", op+" bytes "+unitPer, "bytes", float64(oa.Bytes)/per(a), float64(ob.Bytes)/per(b), neutral)
		add("op", op+" mean time per call", "ns", oa.MeanNS, ob.MeanNS, lower)
		add("op", op+" busbw", "GB/s", oa.BusBWGBps, ob.BusBWGBps, higher)
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
		name := fmt.Sprintf("%s %s %s", k.Op, k.Algo, BucketLabel(k.Bucket))
		weight = share(x.Time.Sum, a, y.Time.Sum, b, steps)
		add("collective", name+" mean time", "ns", x.Time.Mean, y.Time.Mean, lower)
		add("collective", name+" busbw", "GB/s", x.BusBWGBps, y.BusBWGBps, higher)
		add("collective", name+" calls "+unitPer, "count", float64(x.Calls)/per(a), float64(y.Calls)/per(b), neutral)
	}

	// Skew, fit, results.
	weight = 1
	add("skew", "arrival skew mean", "ns", a.Skew.Dist.Mean, b.Skew.Dist.Mean, lower)
	add("skew", "arrival skew p95", "ns", float64(a.Skew.Dist.P95), float64(b.Skew.Dist.P95), lower)
	add("skew", "the costliest straggler's share of the run", "fraction", topShare(a), topShare(b), lower)
	if a.Fit.Usable && b.Fit.Usable {
		// A model without the signal to be shown has nothing to compare.
		add("fit", "link bandwidth (1/beta)", "GB/s", a.Fit.LinkGBps, b.Fit.LinkGBps, higher)
		add("fit", "alpha (per message step)", "ns", a.Fit.AlphaNS, b.Fit.AlphaNS, lower)
		add("fit", "gamma (reduction)", "ns/byte", a.Fit.GammaNSPerB, b.Fit.GammaNSPerB, lower)
	}
	for _, m := range unionKeys(a.Run.Metrics, b.Run.Metrics, strings.Compare) {
		bt := neutral
		switch m {
		case "test_accuracy", "train_accuracy", "images_per_second":
			bt = higher
		case "loss":
			bt = lower
		}
		add("result", m, "", a.Run.Metrics[m], b.Run.Metrics[m], bt)
	}
	for _, k := range unionKeys(a.Run.Config, b.Run.Config, strings.Compare) {
		if a.Run.Config[k] != b.Run.Config[k] {
			d.Config = append(d.Config, ConfigChange{Key: k, A: a.Run.Config[k], B: b.Run.Config[k]})
		}
	}
	if a.Run.WorldSize != b.Run.WorldSize && a.Run.Config["ranks"] == b.Run.Config["ranks"] {
		d.Config = append(d.Config, ConfigChange{Key: "world_size", A: fmt.Sprint(a.Run.WorldSize), B: fmt.Sprint(b.Run.WorldSize)})
	}
	sort.SliceStable(d.Changes, func(i, j int) bool { return magnitude(d.Changes[i]) > magnitude(d.Changes[j]) })
	return d
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

func commBytes(s *Summary) float64 {
	var n float64
	for _, o := range s.Ops {
		n += float64(o.Bytes)
	}
	return n
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
