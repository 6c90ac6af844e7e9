package analyze

import "testing"

// The label series' points are every labelled call up to
// labelPointsMax; past that, every 2^k-th in the order they came, never
// more than labelPointsMax.
func TestLabelPointsThin(t *testing.T) {
	for _, n := range []int{10, labelPointsMax - 1, labelPointsMax, 300_000} {
		var l labelPoints
		for i := range n {
			l.add(labelPoint{at: int64(i)})
		}
		if len(l.pts) > labelPointsMax || (n < labelPointsMax && len(l.pts) != n) {
			t.Fatalf("%d calls: %d points kept", n, len(l.pts))
		}
		if l.every&(l.every-1) != 0 {
			t.Fatalf("%d calls: every %d-th kept, not a power of two", n, l.every)
		}
		for j, p := range l.pts {
			if p.at != int64(j*l.every) {
				t.Fatalf("%d calls: point %d is call %d, want %d", n, j, p.at, j*l.every)
			}
		}
		if want := (n + l.every - 1) / l.every; len(l.pts) != want {
			t.Fatalf("%d calls, every %d-th: %d points, want %d", n, l.every, len(l.pts), want)
		}
	}
}
