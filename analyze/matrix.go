package analyze

import (
	"cmp"
	"slices"
	"sort"
	"strings"

	"github.com/commprof/commprof/internal/units"
)

// Who sent what to whom: the communication matrices and message sizes.

// matrices sums the ranks' traffic into the matrices of n ranks, overall
// and per op, as cells of the pairs with traffic; ranks from n on are
// left out (see extent).
func (s *Summarizer) matrices(ranks []*RankSummarizer, n int) (Matrix, []Matrix) {
	type cells map[[2]int]*MatrixCell
	all := cells{}
	per := map[int32]cells{}
	cell := func(m cells, src, dst int) *MatrixCell {
		c := m[[2]int{src, dst}]
		if c == nil {
			c = &MatrixCell{Src: src, Dst: dst}
			m[[2]int{src, dst}] = c
		}
		return c
	}
	opM := func(name int32) cells {
		m := per[name]
		if m == nil {
			m = cells{}
			per[name] = m
		}
		return m
	}
	for _, rs := range ranks {
		src := rs.rank
		addSend := func(m cells, dst int, ns int64) {
			if src < n && dst < n && ns != 0 {
				cell(m, src, dst).SendNS += ns
				cell(all, src, dst).SendNS += ns
			}
		}
		for name, st := range rs.sendNSTo {
			m := opM(name)
			for dst, ns := range st {
				addSend(m, dst, ns)
			}
		}
		for name, far := range rs.sendFar {
			m := opM(name)
			for dst, ns := range far {
				addSend(m, int(dst), ns)
			}
		}
		dst := rs.rank
		for name, acc := range rs.matrices {
			m := opM(name)
			add := func(src int, bytes, msgs, ns int64) {
				if src >= n || dst >= n || bytes == 0 && msgs == 0 && ns == 0 {
					return
				}
				for _, c := range []*MatrixCell{cell(m, src, dst), cell(all, src, dst)} {
					c.Bytes += bytes
					c.Messages += msgs
					c.TimeNS += ns
				}
			}
			for src := range acc.bytes {
				add(src, acc.bytes[src], acc.msgs[src], acc.time[src])
			}
			for src, c := range acc.far {
				add(int(src), c[0], c[1], c[2])
			}
		}
	}
	matrix := func(op string, m cells) Matrix {
		out := Matrix{Op: op, Ranks: n, Cells: make([]MatrixCell, 0, len(m))}
		for _, c := range m {
			out.Cells = append(out.Cells, *c)
		}
		slices.SortFunc(out.Cells, func(a, b MatrixCell) int { return cmp.Or(cmp.Compare(a.Src, b.Src), cmp.Compare(a.Dst, b.Dst)) })
		return out
	}
	out := []Matrix{}
	for name, m := range per {
		out = append(out, matrix(s.str(name), m))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Op < out[j].Op })
	return matrix("", all), out
}

func (s *Summarizer) messageSizes(ranks []*RankSummarizer) []SizeStats {
	merged := map[sizeKey]*SizeStats{}
	for _, rs := range ranks {
		for k, st := range rs.sizes {
			m := merged[k]
			if m == nil {
				m = &SizeStats{Op: s.str(k.name), Bucket: k.bucket, BucketLbl: units.Bucket(k.bucket)}
				merged[k] = m
			}
			m.Messages += st.Messages
			m.Bytes += st.Bytes
			m.TimeNS += st.TimeNS
			m.WaitNS += st.WaitNS
		}
	}
	out := []SizeStats{}
	for _, m := range merged {
		if t := m.TimeNS - m.WaitNS; t > 0 {
			m.GBps = float64(m.Bytes) / float64(t)
		}
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b SizeStats) int {
		return cmp.Or(strings.Compare(a.Op, b.Op), cmp.Compare(a.Bucket, b.Bucket))
	})
	return out
}
