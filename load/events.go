package load

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/commprof/commprof/trace"
)

// Scanned is what Scan found of a run besides its events.
type Scanned struct {
	Ranks    []int   // every stream's rank, in the order of the run's streams
	Problems []error // cut streams, streams that are not traces, and what opening the run found
}

// Scan reads the streams of the run in dir whose rank only says to read
// (nil: all), each once, decoding every column, and calls sink(rank) once
// per stream for the function that is fed its events, in the stream's
// order, on the aligned clock. The functions sink returns are called from
// several goroutines at once, one per stream; the event passed is valid
// only during the call. A cut stream is not an error: its complete
// batches are fed and Scanned.Problems says so.
func Scan(ctx context.Context, dir string, only func(rank int) bool, sink func(rank int) func(*trace.Event)) (*Scanned, error) {
	rf, err := trace.OpenRun(dir)
	if err != nil {
		return nil, err
	}
	out := &Scanned{Problems: rf.Problems}
	sub := &trace.RunFiles{Dir: rf.Dir, Manifest: rf.Manifest}
	for _, st := range rf.Streams {
		out.Ranks = append(out.Ranks, st.Rank)
		if only == nil || only(st.Rank) {
			sub.Streams = append(sub.Streams, st)
		}
	}
	if len(sub.Streams) == 0 {
		return out, nil
	}
	fns := make([]func(*trace.Event), len(sub.Streams))
	for i, st := range sub.Streams {
		fns[i] = sink(st.Rank)
	}
	cut, bad, err := scan(ctx, sub, nil, func(i int, _ trace.RankInfo, b *trace.Batch) {
		for j := 0; j < b.Len; j++ {
			e := b.Event(j)
			fns[i](&e)
		}
	})
	if err != nil {
		return nil, err
	}
	for i, st := range sub.Streams {
		var te *trace.TruncatedError
		switch {
		case errors.As(cut[i], &te):
			out.Problems = append(out.Problems, fmt.Errorf("rank %d (%s): %w", st.Rank, filepath.Base(st.Path), te))
		case bad[i] != nil:
			out.Problems = append(out.Problems, fmt.Errorf("%w; ignored", bad[i]))
		}
	}
	return out, nil
}
