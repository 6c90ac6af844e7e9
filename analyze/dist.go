package analyze

import (
	"math/bits"
	"slices"
)

// Distributions of times: mean and percentiles.

// dist returns d's distribution, with nearest-rank percentiles. It
// reorders d: the percentiles are selected, not sorted for, since sorting
// the durations of millions of calls was most of Finalize's time.
func dist(d []int64) Dist {
	if len(d) == 0 {
		return Dist{}
	}
	var sum int64
	mx := d[0]
	for _, x := range d {
		sum += x
		mx = max(mx, x)
	}
	rank := func(p float64) int {
		k := int(p*float64(len(d))+0.999999) - 1
		return min(max(k, 0), len(d)-1)
	}
	// Each selection leaves larger values after the selected one, so the
	// next, higher percentile is looked for among those only.
	k50, k95, k99 := rank(0.50), rank(0.95), rank(0.99)
	nth(d, k50)
	nth(d[k50:], k95-k50)
	nth(d[k95:], k99-k95)
	return Dist{N: int64(len(d)), Sum: sum, Mean: float64(sum) / float64(len(d)), P50: d[k50], P95: d[k95], P99: d[k99], Max: mx}
}

// nth reorders d so that d[k] is the value a sorted d would hold there,
// with no larger value before it and no smaller one after (quickselect; it
// falls back to sorting the part left when the partitions stay unbalanced).
func nth(d []int64, k int) {
	lo, hi := 0, len(d)-1
	for budget := 2*bits.Len(uint(len(d))) + 8; hi-lo > 16; budget-- {
		if budget == 0 {
			break
		}
		m := lo + (hi-lo)/2
		if d[m] < d[lo] {
			d[m], d[lo] = d[lo], d[m]
		}
		if d[hi] < d[lo] {
			d[hi], d[lo] = d[lo], d[hi]
		}
		if d[hi] < d[m] {
			d[hi], d[m] = d[m], d[hi]
		}
		p := d[m]
		i, j := lo, hi
		for i <= j {
			for d[i] < p {
				i++
			}
			for d[j] > p {
				j--
			}
			if i <= j {
				d[i], d[j] = d[j], d[i]
				i++
				j--
			}
		}
		// d[lo..j] <= p, d[i..hi] >= p, and anything between equals p.
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return
		}
	}
	slices.Sort(d[lo : hi+1])
}

// distAcc gathers a distribution too large to hold, its percentiles as
// exact as dist's, in two passes over the values. Up to distExact values
// are kept as they are; past that the first pass counts values in
// buckets about 1.5% wide, and the second keeps only the values of the
// buckets that hold the percentiles' ranks.
type distAcc struct {
	vals         []int64 // while there are at most distExact
	hist         []int64 // counts by distBucket, past that
	n, sum, mx   int64
	second       bool
	want         [3]int     // the buckets of p50, p95 and p99
	before       [3]int64   // values in buckets below each
	picked       [3][]int64 // the second pass's values of each
	k50, k95, kk int64      // the ranks, once the first pass is over
}

// distExact is how many values a distAcc keeps as they are: 32 KB.
const distExact = 4096

// distBuckets: one below zero, 64 exact below 64, then 64 a power of two.
const distBuckets = 1 + 64 + 57*64

func distBucket(v int64) int {
	switch {
	case v < 0:
		return 0
	case v < 64:
		return 1 + int(v)
	}
	e := bits.Len64(uint64(v)) // 7..63
	return 65 + (e-7)*64 + int(uint64(v)>>(e-7)&63)
}

// add is the first pass's.
func (a *distAcc) add(v int64) {
	if a.n == 0 {
		a.mx = v
	}
	a.n++
	a.sum += v
	a.mx = max(a.mx, v)
	if a.hist == nil {
		a.vals = append(a.vals, v)
		if len(a.vals) <= distExact {
			return
		}
		a.hist = make([]int64, distBuckets)
		for _, x := range a.vals {
			a.hist[distBucket(x)]++
		}
		a.vals = nil
		return
	}
	a.hist[distBucket(v)]++
}

// needsSecond reports whether the values must be passed again, to
// addSecond, before dist.
func (a *distAcc) needsSecond() bool {
	if a.hist == nil || a.second {
		return false
	}
	a.second = true
	rank := func(p float64) int64 {
		k := int64(p*float64(a.n)+0.999999) - 1
		return min(max(k, 0), a.n-1)
	}
	ks := [3]int64{rank(0.50), rank(0.95), rank(0.99)}
	a.k50, a.k95, a.kk = ks[0], ks[1], ks[2]
	var acc int64
	i := 0
	for b, c := range a.hist {
		for i < 3 && ks[i] < acc+c {
			a.want[i], a.before[i] = b, acc
			i++
		}
		acc += c
	}
	return true
}

// addSecond is the second pass's: each value again, in any order.
func (a *distAcc) addSecond(v int64) {
	b := distBucket(v)
	for i := range 3 {
		if b == a.want[i] && (i == 0 || a.want[i-1] != b) {
			a.picked[i] = append(a.picked[i], v)
		}
	}
}

// dist returns the distribution, as dist would of every value.
func (a *distAcc) dist() Dist {
	if a.hist == nil {
		return dist(a.vals)
	}
	pick := func(i int, k int64) int64 {
		for i > 0 && a.want[i-1] == a.want[i] {
			i-- // the same bucket: its values were kept once
		}
		vs := a.picked[i]
		j := int(k - a.before[i])
		nth(vs, j)
		return vs[j]
	}
	return Dist{N: a.n, Sum: a.sum, Mean: float64(a.sum) / float64(a.n), P50: pick(0, a.k50), P95: pick(1, a.k95), P99: pick(2, a.kk), Max: a.mx}
}
