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

// Batch lays events out as a trace.Batch with every column decoded and a
// dictionary of its own for each string column.
func Batch(evs []trace.Event) *trace.Batch {
	n := len(evs)
	b := &trace.Batch{Len: n,
		Rank: make([]int32, n), Peer: make([]int32, n), Step: make([]int32, n), Root: make([]int32, n), Chunk: make([]int32, n),
		Kind: make([]trace.Kind, n), Name: make([]int32, n), Algo: make([]int32, n), DType: make([]int32, n), Comm: make([]int32, n),
		Start: make([]int64, n), Dur: make([]int64, n), Bytes: make([]int64, n), Seq: make([]int64, n), Wait: make([]int64, n),
		Value: make([]float64, n), Label: make([]int32, n)}
	dicts := [5]map[string]int32{{}, {}, {}, {}, {}}
	lists := [5]*[]string{&b.Names, &b.Algos, &b.DTypes, &b.Comms, &b.Labels}
	id := func(d int, s string) int32 {
		if i, ok := dicts[d][s]; ok {
			return i
		}
		i := int32(len(*lists[d]))
		dicts[d][s] = i
		*lists[d] = append(*lists[d], s)
		return i
	}
	for i := range evs {
		e := &evs[i]
		b.Rank[i], b.Peer[i], b.Step[i], b.Root[i], b.Chunk[i] = e.Rank, e.Peer, e.Step, e.Root, e.Chunk
		b.Kind[i] = e.Kind
		b.Name[i], b.Algo[i], b.DType[i], b.Comm[i], b.Label[i] = id(0, e.Name), id(1, e.Algo), id(2, e.DType), id(3, e.Comm), id(4, e.Label)
		b.Start[i], b.Dur[i], b.Bytes[i], b.Seq[i], b.Wait[i], b.Value[i] = e.Start, e.Dur, e.Bytes, e.Seq, e.Wait, e.Value
	}
	return b
}

// Batches cuts evs into batches of BatchSize events, the last one shorter.
func Batches(evs []trace.Event) []*trace.Batch {
	var out []*trace.Batch
	for len(evs) > 0 {
		n := min(BatchSize, len(evs))
		out = append(out, Batch(evs[:n]))
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
