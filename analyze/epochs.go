package analyze

import (
	"math"
	"slices"

	"github.com/commprof/commprof/trace"
)

// Epoch is one training epoch, from the marks the trainer records at the
// end of each (on the lowest rank that recorded them).
type Epoch struct {
	Epoch int `json:"epoch"`
	// EndNS is when its figures were recorded, since the run's first
	// event; TimeNS is its length (from the previous epoch's end, or the
	// run's start).
	EndNS  int64 `json:"end_ns"`
	TimeNS int64 `json:"time_ns"`
	// Samples is how many training samples the run had processed by the
	// epoch's end: completed steps times samples per step (0 if unknown).
	Samples       int64        `json:"samples"`
	TestAccuracy  trace.Number `json:"test_accuracy"`
	TrainAccuracy trace.Number `json:"train_accuracy"`
	Loss          trace.Number `json:"loss"`
	LR            trace.Number `json:"lr"`
}

// epochMarks are the marks an epoch's end carries, in the order the
// trainer records them; "epoch" closes the set.
var epochMarks = map[string]bool{trace.MetricLoss: true, trace.MetricTrainAccuracy: true, trace.MetricTestAccuracy: true, trace.MetricLR: true, trace.MetricEpoch: true}

// epochs builds the epochs from one rank's marks. Runs recorded before
// the "epoch" mark existed close an epoch at each test_accuracy mark.
func epochs(marks []Mark, steps []StepStats, first int64, samplesPerStep int) []Epoch {
	rank := -1
	hasEpoch := false
	for _, m := range marks {
		if epochMarks[m.Name] && (rank < 0 || m.Rank < rank) {
			rank = m.Rank
		}
		hasEpoch = hasEpoch || m.Name == trace.MetricEpoch
	}
	out := []Epoch{}
	if rank < 0 {
		return out
	}
	nan := trace.Number(math.NaN())
	cur := Epoch{TestAccuracy: nan, TrainAccuracy: nan, Loss: nan, LR: nan}
	for _, m := range marks {
		if m.Rank != rank || !epochMarks[m.Name] {
			continue
		}
		switch m.Name {
		case trace.MetricLoss:
			cur.Loss = m.Value
		case trace.MetricTrainAccuracy:
			cur.TrainAccuracy = m.Value
		case trace.MetricTestAccuracy:
			cur.TestAccuracy = m.Value
		case trace.MetricLR:
			cur.LR = m.Value
		}
		if m.Name == trace.MetricEpoch || (!hasEpoch && m.Name == trace.MetricTestAccuracy) {
			cur.Epoch = len(out) + 1
			cur.EndNS = m.AtNS - first
			out = append(out, cur)
			cur = Epoch{TestAccuracy: nan, TrainAccuracy: nan, Loss: nan, LR: nan}
		}
	}
	ends := make([]int64, 0, len(steps))
	for _, st := range steps {
		ends = append(ends, st.StartNS+int64(st.TimeNS)-first)
	}
	slices.Sort(ends)
	prev := int64(0)
	for i := range out {
		out[i].TimeNS = out[i].EndNS - prev
		prev = out[i].EndNS
		if samplesPerStep > 0 {
			n, _ := slices.BinarySearch(ends, out[i].EndNS+1)
			out[i].Samples = int64(n) * int64(samplesPerStep)
		}
	}
	return out
}

// TimeToAccuracy returns when the run first reached test accuracy target
// (since its first event, at an epoch's end), and whether it did.
func TimeToAccuracy(eps []Epoch, target float64) (int64, bool) {
	for _, e := range eps {
		if float64(e.TestAccuracy) >= target {
			return e.EndNS, true
		}
	}
	return 0, false
}
