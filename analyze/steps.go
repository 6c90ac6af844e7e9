package analyze

import (
	"cmp"
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
	// Each rank's steps in order of their starts, and the arrival waits
	// and bytes of the calls that started in each.
	type rankSteps struct {
		st           []stepRec
		reach        []int64 // the latest end of st[:k+1]
		wait, nbytes []int64
	}
	per := make([]*rankSteps, src.world)
	have := false
	for _, rs := range ranks {
		if len(rs.steps) == 0 || rs.rank >= src.world {
			continue
		}
		st := slices.Clone(rs.steps)
		slices.SortStableFunc(st, func(a, b stepRec) int { return cmp.Compare(a.start, b.start) })
		p := &rankSteps{st: st, reach: make([]int64, len(st)), wait: make([]int64, len(st)), nbytes: make([]int64, len(st))}
		for k, x := range st {
			p.reach[k] = x.end
			if k > 0 {
				p.reach[k] = max(p.reach[k], p.reach[k-1])
			}
		}
		per[rs.rank], have = p, true
	}
	if !have {
		return []StepStats{}, StepSummary{}
	}
	src.each(func(calls []callRec, _ [][2]int, waits []int64) {
		for i, c := range calls {
			p := per[c.rank]
			if p == nil {
				continue
			}
			// The steps that hold the call's start: those that started at
			// or before it and end after it.
			k := sort.Search(len(p.st), func(k int) bool { return p.st[k].start > c.start }) - 1
			for ; k >= 0 && p.reach[k] > c.start; k-- {
				if p.st[k].end > c.start {
					p.wait[k] += waits[i]
					p.nbytes[k] += c.bytes
				}
			}
		}
	})
	for _, rs := range ranks {
		p := per[rs.rank]
		if p == nil {
			continue
		}
		r := int32(rs.rank)
		cs, ps, ex := sp[r].comm.cursor(), sp[r].compute.cursor(), sp[r].exposed.cursor()
		for k, x := range p.st {
			comm := cs.clip(x.start, x.end)
			comp := ps.clip(x.start, x.end)
			exposed := ex.clip(x.start, x.end)
			over := comm - exposed
			wsum, bytes := p.wait[k], p.nbytes[k]
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
