package load

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"sync"

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

// Head returns the events of the run in dir that keep accepts, of the
// streams only says to read (nil: all), in time order (by start, then
// rank, then their place in their stream): the first limit of them, or
// all with limit 0. Each stream keeps only its limit earliest events as
// it is read, so that memory follows the limit, not the run.
func Head(ctx context.Context, dir string, only func(rank int) bool, keep func(*trace.Event) bool, limit int) ([]trace.Event, *Scanned, error) {
	type kept struct {
		rank int
		h    earliest
	}
	var mu sync.Mutex
	var streams []*kept
	sc, err := Scan(ctx, dir, only, func(rank int) func(*trace.Event) {
		k := &kept{rank: rank, h: earliest{limit: limit}}
		mu.Lock()
		streams = append(streams, k)
		mu.Unlock()
		pos := 0
		return func(e *trace.Event) {
			if keep == nil || keep(e) {
				k.h.add(posEvent{ev: *e, pos: pos})
			}
			pos++
		}
	})
	if err != nil {
		return nil, nil, err
	}
	// In rank order, each stream's events in its own order, then by time.
	slices.SortFunc(streams, func(a, b *kept) int { return a.rank - b.rank })
	var evs []trace.Event
	for _, k := range streams {
		slices.SortFunc(k.h.evs, func(a, b posEvent) int { return a.pos - b.pos })
		for _, pe := range k.h.evs {
			evs = append(evs, pe.ev)
		}
	}
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].Start != evs[j].Start {
			return evs[i].Start < evs[j].Start
		}
		return evs[i].Rank < evs[j].Rank
	})
	if limit > 0 && len(evs) > limit {
		evs = evs[:limit]
	}
	return evs, sc, nil
}

// posEvent is an event and its place in its stream.
type posEvent struct {
	ev  trace.Event
	pos int
}

// earliest keeps a stream's limit earliest events (by start, then place
// in the stream) in a max-heap, or every event with limit 0.
type earliest struct {
	limit int
	evs   []posEvent
}

func (h *earliest) later(i, j int) bool {
	a, b := h.evs[i], h.evs[j]
	if a.ev.Start != b.ev.Start {
		return a.ev.Start > b.ev.Start
	}
	return a.pos > b.pos
}

func (h *earliest) add(e posEvent) {
	if h.limit <= 0 {
		h.evs = append(h.evs, e)
		return
	}
	if len(h.evs) < h.limit {
		h.evs = append(h.evs, e)
		for i := len(h.evs) - 1; i > 0; { // sift up
			p := (i - 1) / 2
			if !h.later(i, p) {
				break
			}
			h.evs[i], h.evs[p] = h.evs[p], h.evs[i]
			i = p
		}
		return
	}
	top := h.evs[0]
	if e.ev.Start > top.ev.Start || (e.ev.Start == top.ev.Start && e.pos > top.pos) {
		return // later than every event kept
	}
	h.evs[0] = e
	for i := 0; ; { // sift down
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h.evs) && h.later(l, m) {
			m = l
		}
		if r < len(h.evs) && h.later(r, m) {
			m = r
		}
		if m == i {
			break
		}
		h.evs[i], h.evs[m] = h.evs[m], h.evs[i]
		i = m
	}
}

// All reads the whole run in dir into memory, events moved onto the
// aligned clock, for the writers that need every event at once (the
// Perfetto, pprof and CSV exports).
func All(dir string) (*trace.Run, error) { return trace.ReadRun(dir) }

// Files opens the run in dir for a reader that streams each rank's file
// itself (the Parquet export).
func Files(dir string) (*trace.RunFiles, error) { return trace.OpenRun(dir) }
