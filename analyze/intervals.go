package analyze

import "sort"

// span is a half-open time interval [lo, hi) in ns.
type span struct{ lo, hi int64 }

// union sorts spans in place and merges overlapping ones.
func union(s []span) []span {
	if len(s) == 0 {
		return s
	}
	sort.Slice(s, func(i, j int) bool { return s[i].lo < s[j].lo })
	out := s[:1]
	for _, x := range s[1:] {
		last := &out[len(out)-1]
		if x.lo <= last.hi {
			last.hi = max(last.hi, x.hi)
			continue
		}
		out = append(out, x)
	}
	return out
}

// length is the total length of merged spans.
func length(s []span) int64 {
	var n int64
	for _, x := range s {
		n += x.hi - x.lo
	}
	return n
}
