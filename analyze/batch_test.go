package analyze

import "github.com/commprof/commprof/trace"

// The tests' runs are held in memory (trace.Run); these helpers feed them
// to the summarizer batch by batch, as load feeds a run read from disk.
// Packages above analyze use analyze/analyzetest, which analyze's own
// tests cannot import.

// toBatch lays events out as a trace.Batch, so that runs in memory go
// through the same accumulator as streamed ones.
func toBatch(evs []trace.Event, b *trace.Batch) {
	n := len(evs)
	*b = trace.Batch{Len: n,
		Rank: make([]int32, n), Peer: make([]int32, n), Step: make([]int32, n), Root: make([]int32, n), Chunk: make([]int32, n),
		Kind: make([]trace.Kind, n), Name: make([]int32, n), Algo: make([]int32, n), DType: make([]int32, n), Comm: make([]int32, n),
		Start: make([]int64, n), Dur: make([]int64, n), Bytes: make([]int64, n), Seq: make([]int64, n), Wait: make([]int64, n),
		Value: make([]float64, n)}
	dicts := [4]map[string]int32{{}, {}, {}, {}}
	lists := [4]*[]string{&b.Names, &b.Algos, &b.DTypes, &b.Comms}
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
		b.Name[i], b.Algo[i], b.DType[i], b.Comm[i] = id(0, e.Name), id(1, e.Algo), id(2, e.DType), id(3, e.Comm)
		b.Start[i], b.Dur[i], b.Bytes[i], b.Seq[i], b.Wait[i], b.Value[i] = e.Start, e.Dur, e.Bytes, e.Seq, e.Wait, e.Value
	}
}

// Summarize summarizes a run held in memory.
func Summarize(run *trace.Run) *Summary {
	meta := Meta{Dir: run.Dir, Manifest: run.Manifest}
	if run.Manifest != nil {
		meta.WorldSize = run.Manifest.WorldSize
	}
	for _, p := range run.Problems {
		meta.Problems = append(meta.Problems, p.Error())
	}
	s := NewSummarizer(meta)
	for _, rk := range run.Ranks {
		meta.DiskBytes += rk.Bytes
		rs := s.Rank(rk.Info.Rank, rk.Info.Host)
		if rk.Truncated != nil {
			rs.SetTruncated()
		}
		var b trace.Batch
		for evs := rk.Events; len(evs) > 0; {
			n := min(8192, len(evs))
			toBatch(evs[:n], &b)
			rs.AddBatch(&b)
			evs = evs[n:]
		}
	}
	s.meta.DiskBytes = meta.DiskBytes
	return s.Finalize()
}
