// Package interpose records what the collective layer does. It wraps a
// collectives.Transport, so every message becomes a send or recv event, and
// a collectives.Communicator, so every collective call becomes a collective
// event; programs add their own compute, step and mark events through the
// Recorder. Events go to a trace.Writer in the background: recording costs
// a clock read and an append into a preallocated buffer.
//
// A Session ties it together for one rank of a job: it aligns the rank's
// clock with rank 0's, opens the rank's stream in the run directory,
// wraps the transport and the communicator, and at the end measures the
// clocks again, flushes, and (on rank 0) writes the run manifest.
package interpose
