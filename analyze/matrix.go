package analyze

import (
	"cmp"
	"slices"
	"sort"
	"strings"

	"github.com/commprof/commprof/internal/units"
)

// Who sent what to whom: the communication matrices and message sizes.

// matrices sums the ranks' traffic into n × n matrices, overall and per
// op; ranks from n on are left out (see extent).
func (s *Summarizer) matrices(ranks []*RankSummarizer, n int) (Matrix, []Matrix) {
	newM := func(op string) Matrix {
		m := Matrix{Op: op, Bytes: make([][]int64, n), Messages: make([][]int64, n), TimeNS: make([][]int64, n), SendNS: make([][]int64, n)}
		for i := range n {
			m.Bytes[i], m.Messages[i], m.TimeNS[i], m.SendNS[i] = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		}
		return m
	}
	all := newM("")
	per := map[int32]*Matrix{}
	opM := func(name int32) *Matrix {
		m := per[name]
		if m == nil {
			mm := newM(s.str(name))
			m = &mm
			per[name] = m
		}
		return m
	}
	for _, rs := range ranks {
		src := rs.rank
		addSend := func(m *Matrix, dst int, ns int64) {
			if src < n && dst < n {
				m.SendNS[src][dst] += ns
				all.SendNS[src][dst] += ns
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
				if src >= n || dst >= n {
					return
				}
				m.Bytes[src][dst] += bytes
				m.Messages[src][dst] += msgs
				m.TimeNS[src][dst] += ns
				all.Bytes[src][dst] += bytes
				all.Messages[src][dst] += msgs
				all.TimeNS[src][dst] += ns
			}
			for src := range acc.bytes {
				add(src, acc.bytes[src], acc.msgs[src], acc.time[src])
			}
			for src, c := range acc.far {
				add(int(src), c[0], c[1], c[2])
			}
		}
	}
	out := []Matrix{}
	for _, m := range per {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Op < out[j].Op })
	return all, out
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
