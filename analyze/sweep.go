package analyze

import (
	"cmp"
	"math"
	"slices"
	"strconv"
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
}

// SweepConfig is one configuration of a sweep, its figures the mean over
// its repeats (min and max where they differ).
type SweepConfig struct {
	BatchSize   int      `json:"batch_size"` // per rank
	GlobalBatch int      `json:"global_batch"`
	Ranks       int      `json:"ranks"`
	LRScaling   string   `json:"lr_scaling"`
	Warmup      string   `json:"warmup_epochs"`
	LR          string   `json:"lr"`
	Runs        []string `json:"runs"` // run directories, one per repeat
	Failed      int      `json:"failed"`
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
	// smallest rank count, scaled by the rank ratio (1 is perfect); 0
	// when the sweep has one rank count.
	ScalingEfficiency float64 `json:"scaling_efficiency"`
	// ProjectedStepNS is the model's allreduce time per step at the
	// sweep's ProjectRanks, when a model was given.
	ProjectedStepNS float64 `json:"projected_allreduce_ns,omitempty"`
}

// Range is a figure over a configuration's repeats.
type Range struct {
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	N    int     `json:"n"`
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
	return r
}

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
	sw := &Sweep{Target: target, Configs: []SweepConfig{}}
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
		c := s.Run.Config
		b, _ := strconv.Atoi(c["batch_size"])
		k := key{batch: b, ranks: s.Run.WorldSize, rule: c["lr_scaling"], warm: c["warmup_epochs"], lr: c["lr"]}
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
		var acc, epoch, sps, ttt, bytes, exposed, busbw []float64
		var perEpoch [][]float64
		for _, r := range by[k] {
			s := r.Summary
			sc.Runs = append(sc.Runs, r.Dir)
			if s.Run.Status != "complete" || len(s.Epochs) == 0 {
				sc.Failed++
				continue
			}
			acc = append(acc, float64(s.Epochs[len(s.Epochs)-1].TestAccuracy))
			epoch = append(epoch, meanEpoch(s))
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
		sc.EpochAccuracy = []float64{}
		for _, v := range perEpoch {
			sc.EpochAccuracy = append(sc.EpochAccuracy, rangeOf(v).Mean)
		}
		sw.Configs = append(sw.Configs, sc)
	}
	// Scaling efficiency against the smallest rank count of the same
	// batch, rule, warm-up and learning rate.
	for i := range sw.Configs {
		c := &sw.Configs[i]
		base := -1
		for j, o := range sw.Configs {
			if o.BatchSize == c.BatchSize && o.LRScaling == c.LRScaling && o.Warmup == c.Warmup && o.LR == c.LR &&
				(base < 0 || o.Ranks < sw.Configs[base].Ranks) {
				base = j
			}
		}
		if b := sw.Configs[base]; b.Ranks < c.Ranks && b.SamplesPerSec.Mean > 0 {
			c.ScalingEfficiency = c.SamplesPerSec.Mean / (b.SamplesPerSec.Mean * float64(c.Ranks) / float64(b.Ranks))
		}
	}
	return sw
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
