package analyze

import (
	"slices"
	"sort"
)

// Training steps and the program's compute spans by name.

func (s *Summarizer) computeNames(ranks []*RankSummarizer) []NameTime {
	m := map[int32]*NameTime{}
	for _, rs := range ranks {
		for k, v := range rs.computeNames {
			if m[k] == nil {
				m[k] = &NameTime{Name: s.str(k)}
			}
			m[k].Count += v.Count
			m[k].TimeNS += v.TimeNS
		}
	}
	out := []NameTime{}
	for _, v := range m {
		out = append(out, *v)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].TimeNS != out[j].TimeNS {
			return out[i].TimeNS > out[j].TimeNS
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// steps breaks each rank's steps into compute, exposed and overlapped
// communication and idle time, then averages each step over its ranks.
func (s *Summarizer) steps(ranks []*RankSummarizer, src *callSource, sp []rankSpans, samples int) ([]StepStats, StepSummary) {
	type acc struct {
		st    StepStats
		times []int64
	}
	byStep := map[int32]*acc{}
	// The calls' waits and bytes, of the ranks that have steps.
	waitOf := map[int32][]stepWait{}
	perRank := map[int32]int{}
	for _, rs := range ranks {
		if len(rs.steps) > 0 {
			perRank[int32(rs.rank)] = 0
		}
	}
	if len(perRank) == 0 {
		return []StepStats{}, StepSummary{}
	}
	for r := range perRank {
		waitOf[r] = make([]stepWait, 0, src.perRank[r])
	}
	src.each(func(calls []callRec, _ [][2]int, waits []int64) {
		for i, c := range calls {
			if l, ok := waitOf[c.rank]; ok {
				waitOf[c.rank] = append(l, stepWait{c.start, waits[i], c.bytes})
			}
		}
	})
	for _, rs := range ranks {
		if len(rs.steps) == 0 {
			continue
		}
		st := slices.Clone(rs.steps)
		sort.Slice(st, func(i, j int) bool { return st[i].start < st[j].start })
		r := int32(rs.rank)
		cs, ps, ex := sp[r].comm.cursor(), sp[r].compute.cursor(), sp[r].exposed.cursor()
		ws := waitOf[r]
		sort.Slice(ws, func(i, j int) bool { return ws[i].at < ws[j].at })
		var wi int
		for _, x := range st {
			comm := cs.clip(x.start, x.end)
			comp := ps.clip(x.start, x.end)
			exposed := ex.clip(x.start, x.end)
			over := comm - exposed
			var wsum, bytes int64
			for wi < len(ws) && ws[wi].at < x.start {
				wi++
			}
			for k := wi; k < len(ws) && ws[k].at < x.end; k++ {
				wsum += ws[k].wait
				bytes += ws[k].bytes
			}
			a := byStep[x.step]
			if a == nil {
				a = &acc{st: StepStats{Step: int(x.step), StartNS: x.start}}
				byStep[x.step] = a
			}
			d := x.end - x.start
			a.st.Ranks++
			a.st.StartNS = min(a.st.StartNS, x.start)
			a.st.MaxNS = max(a.st.MaxNS, d)
			a.times = append(a.times, d)
			a.st.TimeNS += float64(d)
			a.st.ComputeNS += float64(comp)
			a.st.ExposedNS += float64(exposed)
			a.st.OverlappedNS += float64(over)
			a.st.IdleNS += float64(max(d-comp-exposed, 0))
			a.st.WaitNS += float64(wsum)
			a.st.CommBytes += float64(bytes)
		}
	}
	out := []StepStats{}
	var times []int64
	var sum StepSummary
	for _, a := range byStep {
		n := float64(a.st.Ranks)
		st := a.st
		st.TimeNS /= n
		st.ComputeNS /= n
		st.ExposedNS /= n
		st.OverlappedNS /= n
		st.IdleNS /= n
		st.WaitNS /= n
		st.CommBytes /= n
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Step < out[j].Step })
	for _, st := range out { // in step order, for sums that do not change between reads
		times = append(times, int64(st.TimeNS))
		sum.ComputeNS += st.ComputeNS
		sum.ExposedNS += st.ExposedNS
		sum.OverlappedNS += st.OverlappedNS
		sum.IdleNS += st.IdleNS
		sum.WaitNS += st.WaitNS
	}
	sum.Steps = len(out)
	if len(out) > 0 {
		n := float64(len(out))
		sum.ComputeNS /= n
		sum.ExposedNS /= n
		sum.OverlappedNS /= n
		sum.IdleNS /= n
		sum.WaitNS /= n
		sum.Time = dist(times)
		if samples > 0 && sum.Time.Mean > 0 {
			sum.SamplesPerSec = float64(samples) / (sum.Time.Mean / 1e9)
		}
	}
	return out, sum
}

type stepWait struct{ at, wait, bytes int64 }
