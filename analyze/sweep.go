package analyze

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/trace"
)

// Sweep compares a series of training runs that differ in batch size,
// learning-rate rule and rank count: how accuracy, time to accuracy and
// communication change as the batch grows, and what the learning-rate
// rules win back. docs/metrics.md defines each figure.
type Sweep struct {
	// Target is the test accuracy TimeToTargetNS is measured to.
	Target float64 `json:"target"`
	// Configs are the configurations, by rank count, learning-rate rule
	// and batch size; each holds its repeats.
	Configs []SweepConfig `json:"configs"`
	// Model says where the projection to ProjectRanks came from ("" for
	// none: pass a calibration to get one).
	Model        string `json:"model,omitempty"`
	ProjectRanks int    `json:"project_ranks,omitempty"`
	// The configurations a page leads with, as indexes into Configs
	// (absent for none): the best final test accuracy, the shortest time
	// to the target, the highest throughput.
	BestAccuracy      *int `json:"best_accuracy,omitempty"`
	FastestToTarget   *int `json:"fastest_to_target,omitempty"`
	HighestThroughput *int `json:"highest_throughput,omitempty"`
	// NoRule is what the largest global batch cost without a
	// learning-rate rule, when the sweep has two batch sizes of it.
	NoRule *SweepEnds `json:"no_rule,omitempty"`
	// Findings say in words what the sweep answers: what the largest
	// batch cost each learning-rate rule, and which rule kept the most.
	Findings []string `json:"findings"`
	// Repeats is the fewest repeats any configuration completed. With 2
	// or more, a configuration is picked above (highest throughput,
	// fastest to the target, best accuracy) only when its range over its
	// repeats separates from every other configuration's; with 1, Noise
	// says that the sweep cannot tell run-to-run noise from an effect.
	Repeats int    `json:"repeats"`
	Noise   string `json:"noise,omitempty"`
}

// SweepEnds compares the smallest and the largest global batch of one
// line of a sweep (the same ranks, rule, warm-up and learning rate).
type SweepEnds struct {
	Smallest int `json:"smallest"` // index into Configs
	Largest  int `json:"largest"`  // index into Configs
	// AccuracyChange is the largest's final test accuracy minus the
	// smallest's; Verdict is "worse" when it lost more than half a point
	// (LostAccuracy), else "".
	AccuracyChange float64 `json:"accuracy_change"`
	Verdict        string  `json:"verdict"`
}

// LostAccuracy is the fall of test accuracy (0.005: half a point) beyond
// which a sweep's largest batch is called worse than its smallest.
const LostAccuracy = 0.005

// SweepConfig is one configuration of a sweep, its figures the mean over
// its repeats (min and max where they differ).
type SweepConfig struct {
	BatchSize   int    `json:"batch_size"` // per rank
	GlobalBatch int    `json:"global_batch"`
	Ranks       int    `json:"ranks"`
	LRScaling   string `json:"lr_scaling"`
	Warmup      string `json:"warmup_epochs"`
	LR          string `json:"lr"`
	// Group names the configuration's line in a sweep's charts: every
	// setting but the batch ("lr sqrt, warm-up 1"; the ranks and the base
	// learning rate when the sweep varies them).
	Group  string   `json:"group"`
	Runs   []string `json:"runs"` // run directories, one per repeat
	Failed int      `json:"failed"`
	// Accuracy per epoch (mean over repeats) and at the end.
	EpochAccuracy []float64 `json:"epoch_accuracy"`
	Accuracy      Range     `json:"accuracy"`
	EpochNS       Range     `json:"epoch_ns"`
	SamplesPerSec Range     `json:"samples_per_sec"`
	// TimeToTargetNS is the time to the sweep's target accuracy; Reached
	// says in how many repeats it was reached (the range covers those).
	TimeToTargetNS Range `json:"time_to_target_ns"`
	Reached        int   `json:"reached"`
	// Communication per sample: bytes each rank sent in collectives, and
	// the communication the program waited for.
	CommBytesPerSample Range `json:"comm_bytes_per_sample"`
	ExposedNSPerSample Range `json:"exposed_ns_per_sample"`
	BusBWGBps          Range `json:"busbw_gbps"`
	// ScalingEfficiency is samples/s over the same batch and rule's at the
	// smallest rank count, scaled by the rank ratio (1 is perfect, and
	// the smallest rank count's own); 0 when the sweep has one rank count.
	ScalingEfficiency float64 `json:"scaling_efficiency"`
	// ProjectedStepNS is the model's allreduce time per step at the
	// sweep's ProjectRanks, when a model was given.
	ProjectedStepNS float64 `json:"projected_allreduce_ns,omitempty"`
	// PeakRSSBytes is each repeat's highest peak resident memory of a
	// rank (Resources.PeakRSSBytes); EnergyPerSampleJ its hosts' energy
	// per sample of the global batch. N is 0 where runs did not sample
	// (or measure energy).
	PeakRSSBytes     Range `json:"peak_rss_bytes"`
	EnergyPerSampleJ Range `json:"energy_per_sample_j"`
}

// Range is a figure over a configuration's repeats: their mean, median,
// smallest and largest.
type Range struct {
	Mean   float64 `json:"mean"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

func rangeOf(v []float64) Range {
	if len(v) == 0 {
		return Range{}
	}
	r := Range{Min: v[0], Max: v[0], N: len(v)}
	for _, x := range v {
		r.Mean += x
		r.Min, r.Max = min(r.Min, x), max(r.Max, x)
	}
	r.Mean /= float64(len(v))
	s := slices.Clone(v)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		r.Median = s[n/2]
	} else {
		r.Median = (s[n/2-1] + s[n/2]) / 2
	}
	return r
}

// SuggestedRepeats is how many repeats of each configuration a sweep
// needs to tell run-to-run noise from an effect: with 3, each range has a
// middle and two ends, and ranges that separate say what one run each
// cannot.
const SuggestedRepeats = 3

// SweepRun is one run of a sweep, summarized.
type SweepRun struct {
	Dir     string
	Summary *Summary
}

// DefaultSweepTarget picks a target accuracy when none is given: nine
// tenths of the way to the best accuracy any run reached, rounded down to
// half a percent, so that most configurations reach it.
func DefaultSweepTarget(runs []SweepRun) float64 {
	best := 0.0
	for _, r := range runs {
		if r.Summary != nil {
			best = max(best, bestAccuracy(r.Summary))
		}
	}
	return math.Floor(best*0.9*200) / 200
}

// NewSweep builds a sweep's comparison from its runs. fit, if usable,
// projects each configuration's allreduces to project ranks.
func NewSweep(runs []SweepRun, target float64, fit *Fit, project int) *Sweep {
	sw := &Sweep{Target: target, Configs: []SweepConfig{}, Findings: []string{}}
	if fit != nil && fit.Usable && project > 1 {
		sw.Model, sw.ProjectRanks = fit.Source, project
	}
	type key struct {
		batch, ranks int
		rule, warm   string
		lr           string
	}
	by := map[key][]SweepRun{}
	var keys []key
	for _, r := range runs {
		s := r.Summary
		if s == nil {
			continue
		}
		c := trace.ParseConfig(s.Run.Config)
		k := key{batch: c.BatchSize, ranks: s.Run.WorldSize, rule: c.LRScaling, warm: c.WarmupEpochs, lr: c.LR}
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], r)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.ranks, b.ranks), cmp.Compare(ruleOrder(a.rule), ruleOrder(b.rule)), cmp.Compare(a.rule, b.rule), cmp.Compare(a.warm, b.warm),
			cmp.Compare(a.lr, b.lr), cmp.Compare(a.batch, b.batch))
	})
	for _, k := range keys {
		sc := SweepConfig{BatchSize: k.batch, GlobalBatch: k.batch * k.ranks, Ranks: k.ranks, LRScaling: k.rule, Warmup: k.warm, LR: k.lr, Runs: []string{}}
		var acc, epoch, sps, ttt, bytes, exposed, busbw, peak, energy []float64
		var perEpoch [][]float64
		for _, r := range by[k] {
			s := r.Summary
			sc.Runs = append(sc.Runs, r.Dir)
			if s.Run.Status != "complete" || (len(s.Epochs) == 0 && s.StepSummary.Steps == 0) {
				sc.Failed++
				continue
			}
			// A script of the user's (a PyTorch job) may mark no epochs:
			// its accuracy and epoch time are then unknown, its steps are
			// not.
			if len(s.Epochs) > 0 {
				acc = append(acc, float64(s.Epochs[len(s.Epochs)-1].TestAccuracy))
				epoch = append(epoch, meanEpoch(s))
			}
			sps = append(sps, s.StepSummary.SamplesPerSec)
			if t, ok := TimeToAccuracy(s.Epochs, target); ok {
				ttt = append(ttt, float64(t))
				sc.Reached++
			}
			if n := float64(s.Run.SamplesPerStep); n > 0 && s.StepSummary.Steps > 0 {
				bytes = append(bytes, stepBytes(s)/n)
				exposed = append(exposed, s.StepSummary.ExposedNS/n)
			}
			busbw = append(busbw, s.Headline.BusBWGBps)
			if s.Resources.Sampled {
				peak = append(peak, float64(s.Resources.PeakRSSBytes))
			}
			if s.Resources.Energy.PerSampleJ > 0 {
				energy = append(energy, s.Resources.Energy.PerSampleJ)
			}
			for i, e := range s.Epochs {
				for len(perEpoch) <= i {
					perEpoch = append(perEpoch, nil)
				}
				perEpoch[i] = append(perEpoch[i], float64(e.TestAccuracy))
			}
			if sw.ProjectRanks > 0 && sc.ProjectedStepNS == 0 {
				if p := s.ProjectWith(*fit, []int{sw.ProjectRanks}, []string{"ring"}); p != nil {
					sc.ProjectedStepNS = p.TimeNS[0][0]
				}
			}
		}
		sc.Accuracy, sc.EpochNS, sc.SamplesPerSec = rangeOf(acc), rangeOf(epoch), rangeOf(sps)
		sc.TimeToTargetNS, sc.CommBytesPerSample, sc.ExposedNSPerSample, sc.BusBWGBps = rangeOf(ttt), rangeOf(bytes), rangeOf(exposed), rangeOf(busbw)
		sc.PeakRSSBytes, sc.EnergyPerSampleJ = rangeOf(peak), rangeOf(energy)
		sc.EpochAccuracy = []float64{}
		for _, v := range perEpoch {
			sc.EpochAccuracy = append(sc.EpochAccuracy, rangeOf(v).Mean)
		}
		sw.Configs = append(sw.Configs, sc)
	}
	for i, c := range sw.Configs {
		if n := c.SamplesPerSec.N; i == 0 || n < sw.Repeats {
			sw.Repeats = n
		}
	}
	if sw.Repeats == 1 && len(sw.Configs) > 1 {
		sw.Noise = fmt.Sprintf("one run per configuration: the sweep cannot tell run-to-run noise from an effect; --repeat %d would", SuggestedRepeats)
	}
	sw.scaling()
	sw.groups()
	sw.highlights()
	sw.findings()
	return sw
}

// scaling sets each configuration's scaling efficiency against the
// smallest rank count of the same batch, rule, warm-up and learning rate.
func (sw *Sweep) scaling() {
	ranks := map[int]bool{}
	for _, c := range sw.Configs {
		ranks[c.Ranks] = true
	}
	if len(ranks) < 2 {
		return
	}
	for i := range sw.Configs {
		c := &sw.Configs[i]
		base := -1
		for j, o := range sw.Configs {
			if o.BatchSize == c.BatchSize && o.LRScaling == c.LRScaling && o.Warmup == c.Warmup && o.LR == c.LR &&
				(base < 0 || o.Ranks < sw.Configs[base].Ranks) {
				base = j
			}
		}
		switch b := sw.Configs[base]; {
		case b.Ranks == c.Ranks && c.SamplesPerSec.N > 0:
			c.ScalingEfficiency = 1 // its own base
		case b.Ranks < c.Ranks && b.SamplesPerSec.Mean > 0:
			c.ScalingEfficiency = c.SamplesPerSec.Mean / (b.SamplesPerSec.Mean * float64(c.Ranks) / float64(b.Ranks))
		}
	}
}

// groups names each configuration's line: the settings the sweep varies
// but the batch.
func (sw *Sweep) groups() {
	varies := func(f func(SweepConfig) string) bool {
		for _, c := range sw.Configs {
			if f(c) != f(sw.Configs[0]) {
				return true
			}
		}
		return false
	}
	byRanks := varies(func(c SweepConfig) string { return strconv.Itoa(c.Ranks) })
	byLR := varies(func(c SweepConfig) string { return c.LR })
	for i := range sw.Configs {
		c := &sw.Configs[i]
		var parts []string
		if byRanks {
			parts = append(parts, plural(c.Ranks, "rank"))
		}
		parts = append(parts, "lr "+c.LRScaling)
		if c.Warmup != "" && c.Warmup != "0" {
			parts = append(parts, "warm-up "+c.Warmup)
		}
		if byLR {
			parts = append(parts, "base lr "+c.LR)
		}
		c.Group = strings.Join(parts, ", ")
	}
}

// highlights picks the configurations a page leads with, and what the
// largest batch cost without a rule.
func (sw *Sweep) highlights() {
	// pick is the configuration with the best median of a figure; with
	// repeats, only when its range separates from every other's (higher
	// is better: its smallest above their largest), else none, and a
	// finding says so.
	pick := func(what string, of func(SweepConfig) Range, higher bool) *int {
		best := -1
		for i, c := range sw.Configs {
			r := of(c)
			if r.N > 0 && (best < 0 || higher && r.Median > of(sw.Configs[best]).Median || !higher && r.Median < of(sw.Configs[best]).Median) {
				best = i
			}
		}
		if best < 0 {
			return nil
		}
		if sw.Repeats < 2 {
			return &best
		}
		b := of(sw.Configs[best])
		for i, c := range sw.Configs {
			if r := of(c); i != best && r.N > 0 && (higher && b.Min <= r.Max || !higher && b.Max >= r.Min) {
				sw.Findings = append(sw.Findings, fmt.Sprintf("no configuration has the %s: over %d repeats, the ranges of %s and %s overlap",
					what, sw.Repeats, sweepLabel(sw.Configs[best]), sweepLabel(c)))
				return nil
			}
		}
		return &best
	}
	sw.BestAccuracy = pick("best test accuracy", func(c SweepConfig) Range { return c.Accuracy }, true)
	sw.FastestToTarget = pick("shortest time to the target", func(c SweepConfig) Range {
		if c.Reached == 0 {
			return Range{}
		}
		return c.TimeToTargetNS
	}, false)
	sw.HighestThroughput = pick("highest throughput", func(c SweepConfig) Range { return c.SamplesPerSec }, true)
	if lo, hi, ok := sw.batchEnds("none"); ok {
		e := &SweepEnds{Smallest: lo, Largest: hi, AccuracyChange: sw.Configs[hi].Accuracy.Mean - sw.Configs[lo].Accuracy.Mean}
		if e.AccuracyChange < -LostAccuracy {
			e.Verdict = "worse"
		}
		sw.NoRule = e
	}
}

// batchEnds are the indexes of the configurations of the smallest and
// largest global batch with rule and an accuracy, on the line (group) of
// the first such configuration.
func (sw *Sweep) batchEnds(rule string) (lo, hi int, ok bool) {
	lo, hi = -1, -1
	for i, c := range sw.Configs {
		if c.LRScaling != rule || c.Accuracy.N == 0 || lo >= 0 && c.Group != sw.Configs[lo].Group {
			continue
		}
		if lo < 0 || c.GlobalBatch < sw.Configs[lo].GlobalBatch {
			lo = i
		}
		if hi < 0 || c.GlobalBatch > sw.Configs[hi].GlobalBatch {
			hi = i
		}
	}
	return lo, hi, lo >= 0 && sw.Configs[lo].GlobalBatch < sw.Configs[hi].GlobalBatch
}

// findings say what the sweep answers, in words: what the largest batch
// of each line reaches against the smallest batch without a rule on the
// same ranks, and which rule kept the most at the largest batch the rules
// ran.
func (sw *Sweep) findings() {
	var lines []string
	for _, c := range sw.Configs {
		if !slices.Contains(lines, c.Group) {
			lines = append(lines, c.Group)
		}
	}
	var best SweepConfig
	for _, g := range lines {
		var at SweepConfig
		for _, c := range sw.Configs {
			if c.Group == g && c.Accuracy.N > 0 && c.GlobalBatch > at.GlobalBatch {
				at = c
			}
		}
		var base SweepConfig
		for _, c := range sw.Configs {
			if c.LRScaling == "none" && c.Ranks == at.Ranks && c.LR == at.LR && c.Accuracy.N > 0 &&
				(base.GlobalBatch == 0 || c.GlobalBatch < base.GlobalBatch) {
				base = c
			}
		}
		if base.GlobalBatch == 0 || at.GlobalBatch <= base.GlobalBatch {
			continue
		}
		sw.Findings = append(sw.Findings, fmt.Sprintf("at global batch %d, %s reaches %s test accuracy (%+.1f points against batch %d without a rule)",
			at.GlobalBatch, g, units.Percent(at.Accuracy.Mean, 2), 100*(at.Accuracy.Mean-base.Accuracy.Mean), base.GlobalBatch))
		if at.LRScaling != "none" && (at.GlobalBatch > best.GlobalBatch || at.GlobalBatch == best.GlobalBatch && at.Accuracy.Mean > best.Accuracy.Mean) {
			best = at
		}
	}
	if best.Group != "" {
		sw.Findings = append(sw.Findings, fmt.Sprintf("of the learning-rate rules, %s keeps the most accuracy at global batch %d: %s",
			best.Group, best.GlobalBatch, units.Percent(best.Accuracy.Mean, 2)))
	}
}

// sweepLabel names a configuration in a finding.
func sweepLabel(c SweepConfig) string {
	return fmt.Sprintf("global batch %d (%s)", c.GlobalBatch, c.Group)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// ruleOrder orders learning-rate rules from the smallest learning rate
// at a large batch to the largest.
func ruleOrder(rule string) int {
	switch rule {
	case "none":
		return 0
	case "sqrt":
		return 1
	case "linear":
		return 2
	}
	return 3
}
