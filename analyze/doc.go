// Package analyze turns a run's events into the figures commprof reports:
// per-collective statistics, per-rank and per-step breakdowns, the
// rank-by-rank communication matrix, message-size histograms, arrival skew
// and stragglers, the pattern of each collective, an alpha-beta-gamma fit
// of the network and its projection to more ranks, and the diff of two
// runs.
//
// Analyses are pure: a Summarizer takes batches of events (one rank at a
// time, ranks in parallel) and Finalize returns a Summary, a plain struct
// that the CLI prints, the report draws and `stats --format json`
// serialises. Nothing here reads files or prints. Memory grows with the
// number of collective calls and compute spans, never with the number of
// messages, which are folded into fixed-size accumulators as they stream
// by. docs/metrics.md defines every figure.
package analyze
