// Package stretch picks the part of a run to look at closely when all of
// it is too much: from counts of events (or operations) in bins of time,
// the run of bins around a centre that holds at most a budget. The
// analyzer's straggler replay and serve's timeline windows both use it.
package stretch

// Around returns the bins [a, b) within [lo, hi) grown from bin mid, one
// bin each side in turn while the total stays within limit: the whole of
// [lo, hi) when it holds no more, and at least bin mid, however many it
// holds.
func Around(counts []int64, lo, hi, mid int, limit int64) (a, b int) {
	a, b = mid, mid+1
	n := counts[mid]
	for {
		grew := false
		if a > lo && n+counts[a-1] <= limit {
			a--
			n += counts[a]
			grew = true
		}
		if b < hi && n+counts[b] <= limit {
			n += counts[b]
			b++
			grew = true
		}
		if !grew {
			return a, b
		}
	}
}
