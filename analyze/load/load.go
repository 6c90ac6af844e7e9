// Package load reads a run directory into an analyze.Summary, streaming
// each rank's batches through the summarizer with the ranks in parallel,
// so that a run larger than memory is summarized in bounded memory (what
// analyze keeps per collective call aside).
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
	errs := make([]error, len(rf.Streams))
	cut := make([]error, len(rf.Streams))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i := range rf.Streams {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var rs *analyze.RankSummarizer
			err := rf.ScanStream(i, func(info trace.RankInfo, b *trace.Batch) error {
				if rs == nil {
					rs = sum.Rank(info.Rank, info.Host)
				}
				if err := ctx.Err(); err != nil {
					return err
				}
				rs.AddBatch(b)
				return nil
			})
			if errors.Is(err, trace.ErrTruncated) {
				if rs == nil {
					rs = sum.Rank(rf.Streams[i].Rank, "")
				}
				rs.SetTruncated()
				cut[i], err = fmt.Errorf("rank %d: %w", rf.Streams[i].Rank, err), nil
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, c := range cut {
		if c != nil {
			meta.Problems = append(meta.Problems, c.Error())
		}
	}
	s := sum.Finalize()
	s.Problems = append(s.Problems[:0:0], meta.Problems...)
	if s.Problems == nil {
		s.Problems = []string{}
	}
	return s, nil
}
