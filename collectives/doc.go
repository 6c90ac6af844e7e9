// Package collectives is commprof's collective communication layer: a
// Communicator per rank offering AllReduce, Broadcast, Reduce, AllGather,
// ReduceScatter, Barrier and point-to-point Send/Recv over a Transport (TCP
// between processes, or in-process channels for tests).
//
// Every message an algorithm sends goes through Transport.Send and
// Transport.Recv together with a Header that names the communicator, the
// collective's sequence number, the operation, the algorithm and the
// algorithm's step index. That is the single point the profiler wraps; this
// package itself knows nothing about profiling.
//
// Semantics follow MPI: every rank of a communicator calls the same
// collectives in the same order with buffers of the same length. Collectives
// may be started concurrently (IAllReduce, IBroadcast); each one's messages
// are matched by its sequence number, so they never mix. A peer that fails
// makes every pending and later call fail with a *PeerError naming it.
//
// Algorithms and the sizes at which they are chosen are documented in
// docs/collectives.md.
package collectives
