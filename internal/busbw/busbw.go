// Package busbw owns bus bandwidth's factor: the number nccl-tests
// multiplies algorithm bandwidth (bytes over time) by so that figures of
// different collectives and rank counts compare with the links' own
// bandwidth. The analyzer, the benchmark and the nccl-tests importer all
// take it from here.
package busbw

// Factor is the factor from algbw to busbw for op on n ranks: 2(n-1)/n
// for allreduce, (n-1)/n for the collectives in which each rank sends or
// receives all but its own share of the buffer (allgather,
// reduce-scatter, all-to-all, and the vector and rooted forms an MPI
// program calls), and 1 for the rest (broadcast, reduce, barrier, point
// to point). Op names are commprof's trace names (allreduce, allgather,
// reducescatter, ...). n < 1 gives 1.
func Factor(op string, n int) float64 {
	if n < 1 {
		return 1
	}
	switch op {
	case "allreduce":
		return 2 * float64(n-1) / float64(n)
	case "allgather", "allgatherv", "reducescatter", "reducescatterv", "alltoall", "alltoallv", "alltoallw",
		"gather", "gatherv", "scatter", "scatterv":
		return float64(n-1) / float64(n)
	}
	return 1
}
