// Package load reads run directories for the analyzer: it streams each
// rank's batches through an analyze.Summarizer (or a timeline builder),
// ranks in parallel, so that a run larger than memory is summarized in
// bounded memory (what analyze keeps per collective call aside).
package load

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/trace"
)

// Summary summarizes the run in dir. Cut streams and missing ranks are
// not errors: they are listed in the summary's Problems. It stops early
// with ctx's error when ctx is cancelled.
func Summary(ctx context.Context, dir string) (*analyze.Summary, error) {
	rf, err := trace.OpenRun(dir)
	if err != nil {
		return nil, err
	}
	meta := analyze.Meta{Dir: dir, Manifest: rf.Manifest, WorldSize: rf.WorldSize()}
	for _, p := range rf.Problems {
		meta.Problems = append(meta.Problems, p.Error())
	}
	for _, s := range rf.Streams {
		meta.DiskBytes += s.Bytes
	}
	sum := analyze.NewSummarizer(meta)
	rs := make([]*analyze.RankSummarizer, len(rf.Streams))
	cut, err := scan(ctx, rf, analyze.SummaryColumns(), func(i int, info trace.RankInfo, b *trace.Batch) {
		if rs[i] == nil {
			rs[i] = sum.Rank(info.Rank, info.Host)
		}
		rs[i].AddBatch(b)
	})
	if err != nil {
		return nil, err
	}
	for i, c := range cut {
		if c == nil {
			continue
		}
		if rs[i] == nil {
			rs[i] = sum.Rank(rf.Streams[i].Rank, "")
		}
		rs[i].SetTruncated()
		meta.Problems = append(meta.Problems, fmt.Sprintf("rank %d: %v", rf.Streams[i].Rank, c))
	}
	s := sum.Finalize()
	s.Problems = append([]string{}, meta.Problems...)
	return s, nil
}

// Timeline reads the run in dir again to build its report timeline; s is
// the run's summary.
func Timeline(ctx context.Context, dir string, s *analyze.Summary, opt analyze.TimelineOptions) (*analyze.TimelineData, error) {
	rf, err := trace.OpenRun(dir)
	if err != nil {
		return nil, err
	}
	tb := analyze.NewTimeline(s, opt)
	trs := make([]*analyze.TimelineRank, len(rf.Streams))
	for i, st := range rf.Streams {
		trs[i] = tb.Rank(st.Rank)
	}
	// A cut stream is already among the summary's problems.
	if _, err := scan(ctx, rf, nil, func(i int, _ trace.RankInfo, b *trace.Batch) { trs[i].AddBatch(b) }); err != nil {
		return nil, err
	}
	return tb.Finalize(), nil
}

// scan feeds every stream's batches, decoded to the columns cols names
// (nil for all), to fn(stream index, ...), streams in
// parallel and each stream's batches in order. A cut stream is not an
// error: its TruncatedError is returned in cut[i].
func scan(ctx context.Context, rf *trace.RunFiles, cols []string, fn func(i int, info trace.RankInfo, b *trace.Batch)) (cut []error, err error) {
	errs := make([]error, len(rf.Streams))
	cut = make([]error, len(rf.Streams))
	// More streams than cores in flight: decoding waits on memory as much
	// as on the CPU, and 4 streams per core measured faster than 1.
	sem := make(chan struct{}, 4*runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i := range rf.Streams {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := rf.ScanStream(i, cols, func(info trace.RankInfo, b *trace.Batch) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				fn(i, info, b)
				return nil
			})
			if errors.Is(err, trace.ErrTruncated) {
				cut[i], err = err, nil
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return cut, errors.Join(errs...)
}

// ReadCount is what Read went through.
type ReadCount struct {
	Streams   int
	Events    int64
	DiskBytes int64
	Cut       int // streams that were cut; their complete batches are counted
}

// Read reads every stream of the run in dir as Summary does, decoding the
// columns cols names (nil for all), and only counts the events: the
// reader's own speed, which `commprof bench read` measures.
func Read(ctx context.Context, dir string, cols []string) (ReadCount, error) {
	rf, err := trace.OpenRun(dir)
	if err != nil {
		return ReadCount{}, err
	}
	c := ReadCount{Streams: len(rf.Streams)}
	for _, s := range rf.Streams {
		c.DiskBytes += s.Bytes
	}
	events := make([]int64, len(rf.Streams))
	cut, err := scan(ctx, rf, cols, func(i int, _ trace.RankInfo, b *trace.Batch) { events[i] += int64(b.Len) })
	if err != nil {
		return c, err
	}
	for i, n := range events {
		c.Events += n
		if cut[i] != nil {
			c.Cut++
		}
	}
	return c, nil
}
