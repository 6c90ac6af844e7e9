// Package trace is commprof's trace format: the event model, the Arrow IPC
// stream each rank writes (rank-NNNNN.arrows), the run manifest (run.json),
// and the readers that validate them. It is a leaf: it imports nothing of
// commprof, and Arrow types do not leave it.
//
// A rank's stream is an Arrow IPC stream of record batches whose schema is
// the v1 schema (schema.go, the Col* names); one row is one Event. Strings are dictionary-encoded and the
// dictionaries only grow, so later batches carry dictionary deltas. Batches
// are written as the run goes, so a rank that dies leaves every batch it
// flushed readable; the reader reports such a stream as cut
// (ErrTruncated) and returns what it held. docs/trace-format.md is the
// specification.
//
// Arrow Go writes and parses the schema message; the dictionary and record
// batch messages are encoded (encode.go) and decoded (decode.go) here, from
// the IPC layout, for speed: one compressor per stream, only the columns a
// reader asks for decompressed, no copies. frame.go checks every message's
// framing before anything is decoded from it.
package trace
