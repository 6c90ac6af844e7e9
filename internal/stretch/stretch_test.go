package stretch

import "testing"

func TestAround(t *testing.T) {
	for _, c := range []struct {
		counts       []int64
		lo, hi, mid  int
		limit        int64
		wantA, wantB int
	}{
		{[]int64{1, 1, 1, 1, 1}, 0, 5, 2, 100, 0, 5},   // all of it fits
		{[]int64{1, 1, 1, 1, 1}, 0, 5, 2, 3, 1, 4},     // one each side
		{[]int64{5, 1, 1, 1, 5}, 0, 5, 2, 4, 1, 4},     // the heavy ends left out
		{[]int64{1, 1, 9, 1, 1}, 0, 5, 2, 3, 2, 3},     // a centre over the limit is kept alone
		{[]int64{1, 9, 1, 1, 1}, 0, 5, 2, 4, 2, 5},     // grows on the side that fits
		{[]int64{1, 1, 1, 1, 1, 1}, 1, 4, 1, 10, 1, 4}, // within [lo, hi)
	} {
		a, b := Around(c.counts, c.lo, c.hi, c.mid, c.limit)
		if a != c.wantA || b != c.wantB {
			t.Errorf("Around(%v, %d, %d, %d, %d) = [%d, %d), want [%d, %d)", c.counts, c.lo, c.hi, c.mid, c.limit, a, b, c.wantA, c.wantB)
		}
	}
}
