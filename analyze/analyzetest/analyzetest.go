// Package analyzetest feeds runs held in memory (trace.Run) to the
// streaming accumulators that read runs from disk, for tests: a summary
// of a run built in a test goes through the same code as load.Summary.
package analyzetest

import (
	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/trace"
)

// BatchSize is how many events Batches puts in a batch, as a recorder
// flushes them.
const BatchSize = 8192

// Batches cuts evs into batches of BatchSize events, the last one shorter.
func Batches(evs []trace.Event) []*trace.Batch {
	var out []*trace.Batch
	for len(evs) > 0 {
		n := min(BatchSize, len(evs))
		out = append(out, trace.BatchOf(evs[:n]))
		evs = evs[n:]
	}
	return out
}

// Summarize summarizes a run held in memory as load.Summary summarizes the
// same run read from its directory: rank by rank, batch by batch.
func Summarize(run *trace.Run) *analyze.Summary {
	meta := analyze.Meta{Dir: run.Dir, Manifest: run.Manifest}
	if run.Manifest != nil {
		meta.WorldSize = run.Manifest.WorldSize
	}
	for _, p := range run.Problems {
		meta.Problems = append(meta.Problems, p.Error())
	}
	for _, rk := range run.Ranks {
		meta.DiskBytes += rk.Bytes
	}
	s := analyze.NewSummarizer(meta)
	for _, rk := range run.Ranks {
		rs := s.Rank(rk.Info.Rank, rk.Info.Host)
		if rk.Truncated != nil {
			rs.SetTruncated()
		}
		for _, b := range Batches(rk.Events) {
			rs.AddBatch(b)
		}
	}
	return s.Finalize()
}
