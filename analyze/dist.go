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
