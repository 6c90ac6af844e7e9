package analyze

import (
	"os"

	"github.com/commprof/commprof/trace"
)

// The tests' runs are held in memory (trace.Run); these helpers feed them
// to the summarizer batch by batch, as load feeds a run read from disk.
// Packages above analyze use analyze/analyzetest, which analyze's own
// tests cannot import.

// Summarize summarizes a run held in memory.
func Summarize(run *trace.Run) *Summary { return summarizeReplaying(run, 0) }

// summarizeReplaying is Summarize with the replay bounded to ops
// operations (0: the default).
func summarizeReplaying(run *trace.Run, ops int64) *Summary { return summarizeChunked(run, ops, 0, 0) }

// summarizeChunked is summarizeReplaying with passes over the calls that
// hold chunk of them at once (0: the default), and the calls' packed logs
// spilled past spill bytes (0: the default).
func summarizeChunked(run *trace.Run, ops int64, chunk int, spill int64) *Summary {
	return fed(run, ops, chunk, spill).Finalize()
}

// fed is a summarizer fed run, not finalized yet.
func fed(run *trace.Run, ops int64, chunk int, spill int64) *Summarizer {
	meta := Meta{Dir: run.Dir, Manifest: run.Manifest, ReplayOps: ops}
	if run.Manifest != nil {
		meta.WorldSize = run.Manifest.WorldSize
	}
	for _, p := range run.Problems {
		meta.Problems = append(meta.Problems, p.Error())
	}
	s := NewSummarizer(meta)
	s.chunk = chunk
	if spill > 0 {
		s.spill.budget, s.spill.open = spill, tempSpill
	}
	for _, rk := range run.Ranks {
		meta.DiskBytes += rk.Bytes
		rs := s.Rank(rk.Info.Rank, rk.Info.Host)
		if rk.Truncated != nil {
			rs.SetTruncated()
		}
		for evs := rk.Events; len(evs) > 0; {
			n := min(8192, len(evs))
			rs.AddBatch(trace.BatchOf(evs[:n]))
			evs = evs[n:]
		}
	}
	s.meta.DiskBytes = meta.DiskBytes
	return s
}

// tempSpill is load's: a temporary file, removed as it is made.
func tempSpill() (SpillFile, error) {
	f, err := os.CreateTemp("", "commprof-test-calls-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	return f, nil
}
