package analyze

import (
	"cmp"
	"slices"
	"sort"
	"strings"
)

// Arrival skew at collectives, over the run and per label.

// skewSeriesMax is how many world calls the skew heatmap samples.
const skewSeriesMax = 400

// skew measures arrival skew; rows is one more than the highest rank
// with a stream, n the extent of the sampled series' rows (see extent).
func (s *Summarizer) skew(src *callSource, cen *callCensus, rows, n int) Skew {
	sk := Skew{Ranking: []int{}, ByOp: []OpSkew{}, Series: SkewSeries{Seq: []int64{}, Op: []string{}, Label: []string{}, Offset: [][]int64{}}}
	var all distAcc
	byOp := map[int32]*distAcc{}
	worldID, hasWorld := s.strIdx["world"]
	// The series samples the world calls, every stride-th.
	stride := max(1, (cen.worldCalls+skewSeriesMax-1)/skewSeriesMax)
	k := 0 // the world calls seen
	src.each(func(calls []callRec, inst [][2]int, _ []int64) {
		for _, in := range inst {
			first, last, ok := skewed(calls, in)
			if !ok {
				continue
			}
			all.add(last - first)
			op := byOp[calls[in[0]].name]
			if op == nil {
				op = &distAcc{}
				byOp[calls[in[0]].name] = op
			}
			op.add(last - first)
			if !hasWorld || calls[in[0]].comm != worldID {
				continue
			}
			if k++; (k-1)%stride != 0 {
				continue
			}
			row := make([]int64, n)
			for r := range row {
				row[r] = -1
			}
			for _, c := range calls[in[0]:in[1]] {
				if int(c.rank) < n {
					row[c.rank] = c.start - first
				}
			}
			sk.Series.Seq = append(sk.Series.Seq, calls[in[0]].seq)
			sk.Series.Op = append(sk.Series.Op, s.str(calls[in[0]].name))
			sk.Series.Label = append(sk.Series.Label, s.str(calls[in[0]].label))
			sk.Series.Offset = append(sk.Series.Offset, row)
		}
	})
	second := all.needsSecond()
	for _, op := range byOp {
		second = op.needsSecond() || second
	}
	if second {
		// The skews around the percentiles of many calls, again.
		src.each(func(calls []callRec, inst [][2]int, _ []int64) {
			for _, in := range inst {
				first, last, ok := skewed(calls, in)
				if !ok {
					continue
				}
				if all.second {
					all.addSecond(last - first)
				}
				if op := byOp[calls[in[0]].name]; op.second {
					op.addSecond(last - first)
				}
			}
		})
	}
	sk.Calls = all.n
	sk.Dist = all.dist()
	sk.ByLabel, sk.LabelSeries = []LabelSkew{}, LabelSeries{AtNS: []int64{}, Label: []string{}, SkewNS: []int64{}, Last: []int{}}
	if cen.labelled {
		sk.ByLabel, sk.LabelSeries = s.labelSkew(src)
	}
	for name, d := range byOp {
		sk.ByOp = append(sk.ByOp, OpSkew{Op: s.str(name), Dist: d.dist()})
	}
	sort.Slice(sk.ByOp, func(i, j int) bool { return sk.ByOp[i].Op < sk.ByOp[j].Op })
	lastN, late, cnt := cen.lastN, cen.late, cen.lateN
	for r := range rows {
		if cnt[r] > 0 {
			sk.Ranking = append(sk.Ranking, r)
		}
	}
	sort.SliceStable(sk.Ranking, func(i, j int) bool {
		a, b := sk.Ranking[i], sk.Ranking[j]
		if lastN[a] != lastN[b] {
			return lastN[a] > lastN[b]
		}
		return late[a]/float64(cnt[a]) > late[b]/float64(cnt[b])
	})
	return sk
}

// skewed returns the first and last arrival at instance in, ok when it
// counts in the skew: a timed call of two ranks or more.
func skewed(calls []callRec, in [2]int) (first, last int64, ok bool) {
	if in[1]-in[0] < 2 || untimed(calls, in) {
		return 0, 0, false
	}
	first, last = calls[in[0]].start, calls[in[0]].start
	for _, c := range calls[in[0]:in[1]] {
		first, last = min(first, c.start), max(last, c.start)
	}
	return first, last, true
}

// labelSkew is arrival skew per label (tensor), and every labelled call
// over time.
func (s *Summarizer) labelSkew(src *callSource) ([]LabelSkew, LabelSeries) {
	type acc struct {
		st    LabelSkew
		skews distAcc
		last  map[int]*LastRank
	}
	by := map[int32]*acc{}
	var pts labelPoints
	src.each(func(calls []callRec, inst [][2]int, _ []int64) {
		for _, in := range inst {
			c0 := calls[in[0]]
			if in[1]-in[0] < 2 || c0.label == 0 || untimed(calls, in) {
				continue
			}
			first, last, next, who := c0.start, int64(-1<<62), int64(-1<<62), -1
			var wait int64
			for _, c := range calls[in[0]:in[1]] {
				first = min(first, c.start)
				switch {
				case c.start > last:
					next, last, who = last, c.start, int(c.rank)
				case c.start > next:
					next = c.start
				}
			}
			for _, c := range calls[in[0]:in[1]] {
				wait += min(last-c.start, c.dur)
			}
			a := by[c0.label]
			if a == nil {
				a = &acc{st: LabelSkew{Label: s.str(c0.label), Op: s.str(c0.name)}, last: map[int]*LastRank{}}
				by[c0.label] = a
			}
			a.st.Calls++
			a.st.Bytes = max(a.st.Bytes, c0.bytes)
			a.st.WaitNS += wait
			a.skews.add(last - first)
			if last > first && who >= 0 {
				lr := a.last[who]
				if lr == nil {
					lr = &LastRank{Rank: who}
					a.last[who] = lr
				}
				lr.Calls++
				lr.LateNS += last - next
			}
			pts.add(labelPoint{first, last - first, c0.label, who})
		}
	})
	second := false
	for _, a := range by {
		second = a.skews.needsSecond() || second
	}
	if second {
		// The skews around the percentiles of the labels of many calls,
		// again.
		src.each(func(calls []callRec, inst [][2]int, _ []int64) {
			for _, in := range inst {
				c0 := calls[in[0]]
				if in[1]-in[0] < 2 || c0.label == 0 || untimed(calls, in) {
					continue
				}
				if a := by[c0.label]; a.skews.second {
					first, last, _ := skewed(calls, in)
					a.skews.addSecond(last - first)
				}
			}
		})
	}
	out := []LabelSkew{}
	for _, a := range by {
		a.st.Dist = a.skews.dist()
		for _, lr := range a.last {
			a.st.Last = append(a.st.Last, *lr)
		}
		slices.SortFunc(a.st.Last, func(x, y LastRank) int { return cmp.Or(cmp.Compare(y.LateNS, x.LateNS), cmp.Compare(x.Rank, y.Rank)) })
		a.st.Last = orEmpty(a.st.Last)
		out = append(out, a.st)
	}
	slices.SortFunc(out, func(x, y LabelSkew) int {
		return cmp.Or(cmp.Compare(y.WaitNS, x.WaitNS), strings.Compare(x.Label, y.Label))
	})
	if len(out) > 200 {
		out = out[:200]
	}
	slices.SortFunc(pts.pts, func(x, y labelPoint) int { return cmp.Compare(x.at, y.at) })
	ser := LabelSeries{AtNS: []int64{}, Label: []string{}, SkewNS: []int64{}, Last: []int{}}
	stride := max(1, (len(pts.pts)+1999)/2000)
	for i := 0; i < len(pts.pts); i += stride {
		p := pts.pts[i]
		ser.AtNS = append(ser.AtNS, p.at)
		ser.Label = append(ser.Label, s.str(p.label))
		ser.SkewNS = append(ser.SkewNS, p.skew)
		ser.Last = append(ser.Last, p.last)
	}
	return out, ser
}

// labelPoint is one labelled call for the label series: its first
// arrival, skew, label and the rank that came last.
type labelPoint struct {
	at, skew int64
	label    int32
	last     int
}

// labelPoints keeps the labelled calls' points for the series, every one
// up to labelPointsMax; past that, each time it is full, every other one
// it holds (so every 2^k-th call in the order they come): the series of
// a long run, at most 2,000 points, is sampled from a bounded set.
type labelPoints struct {
	pts         []labelPoint
	every, seen int
}

const labelPointsMax = 1 << 16

func (l *labelPoints) add(p labelPoint) {
	l.every = max(l.every, 1)
	if l.seen++; (l.seen-1)%l.every != 0 {
		return
	}
	l.pts = append(l.pts, p)
	if len(l.pts) == labelPointsMax {
		n := 0
		for i := 0; i < len(l.pts); i += 2 {
			l.pts[n] = l.pts[i]
			n++
		}
		l.pts = l.pts[:n]
		l.every *= 2
	}
}
