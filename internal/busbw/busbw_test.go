package busbw

import "testing"

// The factors nccl-tests' own documentation (doc/PERFORMANCE.md) derives:
// allreduce 2(n-1)/n, allgather and reduce-scatter (n-1)/n, broadcast and
// reduce 1.
func TestFactor(t *testing.T) {
	for _, tc := range []struct {
		op   string
		n    int
		want float64
	}{
		{"allreduce", 8, 1.75},
		{"allreduce", 2, 1},
		{"allreduce", 1, 0},
		{"allgather", 4, 0.75},
		{"reducescatter", 4, 0.75},
		{"alltoall", 16, 0.9375},
		{"gatherv", 2, 0.5},
		{"broadcast", 8, 1},
		{"reduce", 8, 1},
		{"barrier", 8, 1},
		{"allreduce", 0, 1},
	} {
		if got := Factor(tc.op, tc.n); got != tc.want {
			t.Errorf("Factor(%q, %d) = %v, want %v", tc.op, tc.n, got, tc.want)
		}
	}
}
