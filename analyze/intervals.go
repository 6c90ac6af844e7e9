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

// intersect returns the intersection of two merged span lists.
func intersect(a, b []span) []span {
	var out []span
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		lo, hi := max(a[i].lo, b[j].lo), min(a[i].hi, b[j].hi)
		if lo < hi {
			out = append(out, span{lo, hi})
		}
		if a[i].hi < b[j].hi {
			i++
		} else {
			j++
		}
	}
	return out
}

// clipLength returns how much of merged spans s lies in [lo, hi), starting
// the search at s[*from] and advancing *from past spans that end before lo;
// windows must be visited in increasing lo order for the cursor to be valid.
func clipLength(s []span, from *int, lo, hi int64) int64 {
	for *from < len(s) && s[*from].hi <= lo {
		*from++
	}
	var n int64
	for k := *from; k < len(s) && s[k].lo < hi; k++ {
		n += min(s[k].hi, hi) - max(s[k].lo, lo)
	}
	return n
}

// subtract returns the parts of merged spans a not in merged spans b.
func subtract(a, b []span) []span {
	if len(b) == 0 {
		return a // spans are not changed once merged: no copy needed
	}
	var out []span
	j := 0
	for _, x := range a {
		lo := x.lo
		for j < len(b) && b[j].hi <= lo {
			j++
		}
		for k := j; k < len(b) && b[k].lo < x.hi; k++ {
			if b[k].lo > lo {
				out = append(out, span{lo, b[k].lo})
			}
			lo = max(lo, b[k].hi)
		}
		if lo < x.hi {
			out = append(out, span{lo, x.hi})
		}
	}
	return out
}
