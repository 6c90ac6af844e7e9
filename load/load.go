// Package load reads run directories for the analyzer: it streams each
// rank's batches through an analyze.Summarizer (or, for a page built after
// the summary, to the page's own accumulators), ranks in parallel.
// Messages are folded into fixed-size accumulators as they stream by;
// what grows with the run is analyze's record of each rank's collective
// calls: 863 MB of peak memory for the 6.4 million of a 100M-event run,
// some 140 bytes a call (docs/benchmarks.md, "10, 100 and 300 million
// events").
package load

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/trace"
)

// Summary summarizes the run in dir. Cut streams and missing ranks are
// not errors: they are listed in the summary's Problems. It stops early
// with ctx's error when ctx is cancelled.
func Summary(ctx context.Context, dir string) (*analyze.Summary, error) {
	r, err := Load(ctx, dir, nil)
	if err != nil {
		return nil, err
	}
	return r.Summary, nil
}

// Run is a run read by Load: its summary, and the events kept for a view
// built after it.
type Run struct {
	Summary *analyze.Summary

	dir     string
	keep    Keep
	ranks   []int     // each stream's rank
	keepers []*keeper // nil when nothing was kept
	events  int64     // kept events
	bytes   int64     // what they take
}

// Load reads and summarizes the run in dir as Summary does, and keeps in
// memory the events keep asks for (nil for none), decoded in the same
// read, so that Replay can feed them to a view that needs the summary
// first without reading the run again. Events that would take more than
// keep's budget are not kept; Replay then reads the run a second time.
func Load(ctx context.Context, dir string, keep *Keep) (*Run, error) {
	cols := analyze.SummaryColumns()
	var kept []string
	if keep != nil {
		var err error
		if kept, err = keep.check(); err != nil {
			return nil, err
		}
		for _, c := range kept {
			if !slices.Contains(cols, c) {
				cols = append(cols, c)
			}
		}
	}
	rf, err := trace.OpenRun(dir)
	if err != nil {
		return nil, err
	}
	// A run that says it is running with no recorder left is shown
	// abandoned (what the killed recorder left stays: load only reads).
	if m := rf.Manifest; m != nil {
		if st := rundir.Status(dir, m); st != m.Status {
			shown := *m
			shown.Status = st
			rf.Manifest = &shown
		}
	}
	run := &Run{dir: dir}
	for _, st := range rf.Streams {
		run.ranks = append(run.ranks, st.Rank)
	}
	var shared budget
	if keep != nil {
		run.keep = *keep
		shared.max.Store(cmp.Or(keep.Budget, DefaultBudget))
		for range rf.Streams {
			run.keepers = append(run.keepers, newKeeper(kept, keep.Kinds, &shared))
		}
	}
	meta := analyze.Meta{Dir: dir, Manifest: rf.Manifest, WorldSize: rf.WorldSize(), Spill: tempSpill}
	for _, p := range rf.Problems {
		meta.Problems = append(meta.Problems, p.Error())
	}
	for _, s := range rf.Streams {
		meta.DiskBytes += s.Bytes
	}
	own := len(meta.Problems) // Finalize adds its own after these
	sum := analyze.NewSummarizer(meta)
	rs := make([]*analyze.RankSummarizer, len(rf.Streams))
	var done func(i int)
	if run.keepers != nil {
		done = func(i int) { run.keepers[i].finish() }
	}
	cut, bad, err := scanStreams(ctx, rf, cols, nil, func(i int, info trace.RankInfo, b *trace.Batch) {
		if rs[i] == nil {
			rs[i] = sum.Rank(info.Rank, info.Host)
		}
		rs[i].AddBatch(b)
		if run.keepers != nil {
			run.keepers[i].add(b)
		}
	}, done)
	if err != nil {
		return nil, err
	}
	for _, err := range bad {
		if err != nil {
			meta.Problems = append(meta.Problems, fmt.Sprintf("%v; ignored", err))
		}
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
	if shared.over.Load() {
		run.keepers = nil // for the collector: Replay reads the run again
	} else {
		run.events, run.bytes = shared.events.Load(), shared.used.Load()
	}
	s := sum.Finalize()
	s.Problems = append(append([]string{}, meta.Problems...), s.Problems[own:]...)
	run.Summary = s
	return run, nil
}

// Kept returns how many events Load kept and the bytes they take: 0, 0
// when it was asked to keep none or they went over its budget.
func (r *Run) Kept() (events, bytes int64) { return r.events, r.bytes }

// Reread reports whether Replay reads the run's streams again: Load kept
// no events because it was asked for none or they went over its budget.
func (r *Run) Reread() bool { return r.keepers == nil }

// Replay feeds the events Load kept, stream by stream, as Events does:
// sink(stream index, rank) is called for every stream first, then the
// functions it returns are called concurrently, one goroutine per stream,
// with that stream's events in order. The batches hold the kept columns
// and the kept kinds. When nothing was kept (see Reread), Replay reads the
// run in its directory again, decoding only the kept columns of a Keep
// (or every column when Load had none), and feeds events of every kind.
func (r *Run) Replay(ctx context.Context, sink func(stream, rank int) func(*trace.Batch)) error {
	if r.Reread() {
		var cols []string
		if r.keep.Columns != nil {
			var err error
			if cols, err = r.keep.check(); err != nil {
				return err
			}
		}
		return Events(ctx, r.dir, cols, sink)
	}
	fns := make([]func(*trace.Batch), len(r.keepers))
	for i, rank := range r.ranks {
		fns[i] = sink(i, rank)
	}
	var wg sync.WaitGroup
	for i, k := range r.keepers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k.replay(ctx, fns[i])
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// Events reads every stream of the run in dir, decoding the columns cols
// names (nil for all), and feeds its batches to the function that
// sink(stream index, rank) returned for that stream. sink is called once
// per stream, one stream after the other, before any batch is fed; the
// functions it returns are called from several goroutines at once, one
// per stream, with each stream's batches in order. A batch is valid only
// during the call. A cut stream is not an error here (Summary lists it
// among the run's problems): its complete batches are fed.
func Events(ctx context.Context, dir string, cols []string, sink func(stream, rank int) func(*trace.Batch)) error {
	return events(ctx, dir, cols, nil, sink)
}

// EventsWithin is Events, feeding only the batches that hold an event
// overlapping [from, to) (ns by the run's clock, start < to and start +
// dur >= from); the others are read for their start and dur alone, or,
// where spans (by stream index, may be nil) give a batch's extent as an
// earlier read saw it (trace.BatchSpan), not decoded at all. The batches
// fed hold other events too.
func EventsWithin(ctx context.Context, dir string, cols []string, from, to int64, spans [][][2]int64, sink func(stream, rank int) func(*trace.Batch)) error {
	return events(ctx, dir, cols, &within{from, to, spans}, sink)
}

// within is what EventsWithin reads.
type within struct {
	from, to int64
	spans    [][][2]int64
}

func events(ctx context.Context, dir string, cols []string, in *within, sink func(stream, rank int) func(*trace.Batch)) error {
	rf, err := trace.OpenRun(dir)
	if err != nil {
		return err
	}
	fns := make([]func(*trace.Batch), len(rf.Streams))
	for i, st := range rf.Streams {
		fns[i] = sink(i, st.Rank)
	}
	_, _, err = scanStreams(ctx, rf, cols, in, func(i int, _ trace.RankInfo, b *trace.Batch) { fns[i](b) }, nil)
	return err
}

// scan feeds every stream's batches, decoded to the columns cols names
// (nil for all), to fn(stream index, ...), streams in
// parallel and each stream's batches in order. A cut stream is not an
// error: its TruncatedError is returned in cut[i]. Nor is a stream that
// is not a trace at all (a damaged schema, another file in its place):
// bad[i] says why it was left out. A run none of whose streams is a
// trace is an error.
func scan(ctx context.Context, rf *trace.RunFiles, cols []string, fn func(i int, info trace.RankInfo, b *trace.Batch)) (cut, bad []error, err error) {
	return scanStreams(ctx, rf, cols, nil, fn, nil)
}

// scanStreams is scan, reading only the batches that hold events in in's
// window (if in is not nil; see trace.ScanStreamWithin), and calling
// done(i) (if not nil) from stream i's goroutine once the stream is read,
// whatever ended it.
func scanStreams(ctx context.Context, rf *trace.RunFiles, cols []string, in *within, fn func(i int, info trace.RankInfo, b *trace.Batch), done func(i int)) (cut, bad []error, err error) {
	errs := make([]error, len(rf.Streams))
	cut = make([]error, len(rf.Streams))
	bad = make([]error, len(rf.Streams))
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
			each := func(info trace.RankInfo, b *trace.Batch) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				fn(i, info, b)
				return nil
			}
			var err error
			if in != nil {
				var spans [][2]int64
				if i < len(in.spans) {
					spans = in.spans[i]
				}
				err = rf.ScanStreamWithin(i, cols, in.from, in.to, spans, each)
			} else {
				err = rf.ScanStream(i, cols, each)
			}
			switch {
			case errors.Is(err, trace.ErrTruncated):
				cut[i], err = err, nil
			case errors.Is(err, trace.ErrNotTrace):
				bad[i], err = err, nil
			}
			errs[i] = err
			if done != nil {
				done(i)
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	if !slices.ContainsFunc(bad, func(e error) bool { return e == nil }) {
		return nil, nil, errors.Join(bad...)
	}
	return cut, bad, nil
}

// ReadCount is what Read went through.
type ReadCount struct {
	Streams   int
	Events    int64
	DiskBytes int64
	Cut       int // streams that were cut; their complete batches are counted
	// Status is the run's status as run.json says it (with a recorder
	// gone, abandoned), "" without a manifest.
	Status string
	// Problems are what was wrong but not fatal: cut streams, streams
	// that are not traces, what opening the run found.
	Problems []error
}

// Count is what the run in dir holds, as Read counts it, taken from
// run.json where every rank's writer counted its stream as it closed it
// (a complete run): then no stream is read. Otherwise it reads the
// streams' kind column.
func Count(ctx context.Context, dir string) (ReadCount, error) {
	rf, err := trace.OpenRun(dir)
	if err != nil {
		return ReadCount{}, err
	}
	if m := rf.Manifest; m != nil && m.Status == trace.StatusComplete && len(rf.Problems) == 0 && len(rf.Streams) > 0 && len(m.Ranks) == len(rf.Streams) {
		c := ReadCount{Streams: len(rf.Streams), Status: rundir.Status(dir, m)}
		for _, s := range rf.Streams {
			c.DiskBytes += s.Bytes
		}
		counted := true
		for _, r := range m.Ranks {
			counted = counted && r.Events > 0
			c.Events += r.Events
		}
		if counted {
			return c, nil
		}
	}
	return Read(ctx, dir, []string{trace.ColKind})
}

// Read reads every stream of the run in dir as Summary does, decoding the
// columns cols names (nil for all), and only counts the events: what
// `commprof record` says it recorded, and the reader's own speed, which
// `commprof bench read` measures.
func Read(ctx context.Context, dir string, cols []string) (ReadCount, error) {
	rf, err := trace.OpenRun(dir)
	if err != nil {
		return ReadCount{}, err
	}
	c := ReadCount{Streams: len(rf.Streams), Problems: rf.Problems}
	if m := rf.Manifest; m != nil {
		c.Status = rundir.Status(dir, m)
	}
	for _, s := range rf.Streams {
		c.DiskBytes += s.Bytes
	}
	events := make([]int64, len(rf.Streams))
	cut, bad, err := scan(ctx, rf, cols, func(i int, _ trace.RankInfo, b *trace.Batch) { events[i] += int64(b.Len) })
	if err != nil {
		return c, err
	}
	for i, n := range events {
		c.Events += n
		var te *trace.TruncatedError
		switch {
		case errors.As(cut[i], &te):
			c.Cut++
			c.Problems = append(c.Problems, fmt.Errorf("rank %d (%s): %w", rf.Streams[i].Rank, filepath.Base(rf.Streams[i].Path), te))
		case bad[i] != nil:
			c.Problems = append(c.Problems, fmt.Errorf("%w; ignored", bad[i]))
		}
	}
	return c, nil
}

// tempSpill opens the file a summary spills its packed calls to: a
// temporary file in TMPDIR, removed as soon as it is made, so that
// nothing is left behind whatever ends the process.
func tempSpill() (analyze.SpillFile, error) {
	f, err := os.CreateTemp("", "commprof-calls-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	return f, nil
}
