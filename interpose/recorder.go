package interpose

import (
	"cmp"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname

	"github.com/commprof/commprof/trace"
)

// nanotime is the runtime's monotonic clock (CLOCK_MONOTONIC on Linux, read
// through the vDSO): the same clock for every process on a host, which is
// what lets ranks on one host share a time base without measurement.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Monotonic returns the host's monotonic clock in ns.
func Monotonic() int64 { return nanotime() }

// RecorderOptions size a Recorder's buffers.
type RecorderOptions struct {
	ChunkEvents int           // events per buffer, and so per record batch at most (default 16384)
	Chunks      int           // buffers (default 6): memory is bounded by ChunkEvents·Chunks events (about 15 MB)
	FlushEvery  time.Duration // longest time an event waits before it is written (default 1s)
}

// Recorder buffers one rank's events and writes them in the background.
// Record and the span helpers are safe for concurrent use and never
// allocate; when every buffer is waiting to be written, Record waits (and
// the wait is counted in Stalled), so memory stays bounded however long
// the run.
type Recorder struct {
	rank  int32
	epoch int64 // monotonic ns of the run's epoch
	step  atomic.Int32
	// ref and refNS are one instant as a time.Time and as a Monotonic
	// reading: At converts the times the collectives report through them.
	ref   time.Time
	refNS int64

	mu   sync.Mutex
	cur  []trace.Event
	free chan []trace.Event
	full chan []trace.Event

	w       *trace.Writer
	stop    chan struct{}
	done    chan struct{}
	err     error
	closed  bool
	stalled atomic.Int64 // ns Record spent waiting for a buffer
	events  atomic.Int64

	// inflight is the rank's in-flight file, nil when none is kept.
	inflight *InFlight
}

// SetInFlight has the communicators that record through r keep their
// calls in f too (nil: none).
func (r *Recorder) SetInFlight(f *InFlight) { r.inflight = f }

// InFlight is the rank's in-flight file, nil if none.
func (r *Recorder) InFlight() *InFlight { return r.inflight }

// NewRecorder starts recording rank's events into w; times are written as
// ns since epoch (a Monotonic reading). The Recorder owns w and closes it.
func NewRecorder(w *trace.Writer, rank int, epoch int64, opt RecorderOptions) *Recorder {
	if opt.ChunkEvents <= 0 {
		opt.ChunkEvents = 16384
	}
	if opt.Chunks < 2 {
		opt.Chunks = 6
	}
	if opt.FlushEvery <= 0 {
		opt.FlushEvery = time.Second
	}
	r := &Recorder{rank: int32(rank), epoch: epoch, w: w,
		free: make(chan []trace.Event, opt.Chunks), full: make(chan []trace.Event, opt.Chunks),
		stop: make(chan struct{}), done: make(chan struct{})}
	r.step.Store(-1)
	r.ref, r.refNS = clockPair()
	r.cur = make([]trace.Event, 0, opt.ChunkEvents)
	for range opt.Chunks - 1 {
		r.free <- make([]trace.Event, 0, opt.ChunkEvents)
	}
	go r.writer(opt.FlushEvery)
	return r
}

// Now returns the time in ns since the run's epoch on this rank's clock.
func (r *Recorder) Now() int64 { return nanotime() - r.epoch }

// At returns t (a time.Now reading, with Go's monotonic clock) in ns
// since the run's epoch. It reads no clock: converting with Now() -
// time.Since(t) reads two, and a goroutine descheduled between them (ranks
// outnumbering cores) would put t that much too early.
func (r *Recorder) At(t time.Time) int64 { return r.refNS + int64(t.Sub(r.ref)) - r.epoch }

// clockPair returns one instant as a time.Time and as a Monotonic reading:
// the time.Now taken between the two closest of several pairs of
// readings, and their midpoint.
func clockPair() (time.Time, int64) {
	var best time.Time
	var bestNS, gap int64 = 0, -1
	for range 16 {
		a := nanotime()
		w := time.Now()
		b := nanotime()
		if gap < 0 || b-a < gap {
			best, bestNS, gap = w, a+(b-a)/2, b-a
		}
	}
	return best, bestNS
}

// SetStep sets the training step that later events are tagged with (-1
// for none).
func (r *Recorder) SetStep(step int) { r.step.Store(int32(step)) }

// Step returns the current training step.
func (r *Recorder) Step() int32 { return r.step.Load() }

// Record appends an event; its Rank is set to the recorder's.
func (r *Recorder) Record(e *trace.Event) {
	e.Rank = r.rank
	r.mu.Lock()
	r.cur = append(r.cur, *e)
	if len(r.cur) == cap(r.cur) {
		r.swapLocked()
	}
	r.mu.Unlock()
}

// swapLocked hands the current buffer to the writer and takes a free one,
// waiting for the writer if there is none.
func (r *Recorder) swapLocked() {
	r.full <- r.cur
	select {
	case r.cur = <-r.free:
	default:
		t0 := nanotime()
		r.cur = <-r.free
		r.stalled.Add(nanotime() - t0)
	}
}

// Compute records a compute span that started at start (a Now reading)
// and ends now.
func (r *Recorder) Compute(name string, start int64) {
	r.Record(&trace.Event{Kind: trace.KindCompute, Name: name, Start: start, Dur: r.Now() - start,
		Peer: -1, Seq: -1, Step: r.step.Load(), Root: -1, Chunk: -1})
}

// StepSpan records training step number step, from start to now.
func (r *Recorder) StepSpan(step int, start int64) {
	r.Record(&trace.Event{Kind: trace.KindStep, Name: "step", Start: start, Dur: r.Now() - start,
		Peer: -1, Seq: -1, Step: int32(step), Root: -1, Chunk: -1})
}

// Mark records an instant with a value, such as an epoch's test accuracy.
func (r *Recorder) Mark(name string, value float64) {
	r.Record(&trace.Event{Kind: trace.KindMark, Name: name, Start: r.Now(),
		Peer: -1, Seq: -1, Step: r.step.Load(), Root: -1, Chunk: -1, Value: value})
}

// MarkAt records a mark at t, a time.Now reading taken earlier, such as
// the one a benchmark starts its timed loop with.
func (r *Recorder) MarkAt(name string, t time.Time, value float64) {
	r.Record(&trace.Event{Kind: trace.KindMark, Name: name, Start: r.At(t),
		Peer: -1, Seq: -1, Step: r.step.Load(), Root: -1, Chunk: -1, Value: value})
}

// Sample records a reading of a counter now (a sample event), such as
// the bytes of the buffers a program holds.
func (r *Recorder) Sample(name string, value float64) {
	r.Record(&trace.Event{Kind: trace.KindSample, Name: name, Start: r.Now(),
		Peer: -1, Seq: -1, Step: r.step.Load(), Root: -1, Chunk: -1, Value: value})
}

// RecordAt records a mark with a value at a time read earlier from the
// host's monotonic clock (Monotonic), such as an event another process
// saw.
func (r *Recorder) RecordAt(name string, monotonic int64, value float64) {
	r.Record(&trace.Event{Kind: trace.KindMark, Name: name, Start: monotonic - r.epoch,
		Peer: -1, Seq: -1, Step: r.step.Load(), Root: -1, Chunk: -1, Value: value})
}

// Events returns the number of events written so far.
func (r *Recorder) Events() int64 { return r.events.Load() }

// Batches returns the number of record batches written; call it after
// Close.
func (r *Recorder) Batches() int64 { return r.w.Batches() }

// Stalled returns how long Record waited for the writer in total.
func (r *Recorder) Stalled() time.Duration { return time.Duration(r.stalled.Load()) }

func (r *Recorder) writer(every time.Duration) {
	defer close(r.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	write := func(c []trace.Event) {
		// Events are appended as they end; in start order the time
		// columns compress better and readers get batches in time order.
		slices.SortStableFunc(c, func(a, b trace.Event) int { return cmp.Compare(a.Start, b.Start) })
		if r.err == nil && len(c) > 0 {
			if err := r.w.Write(c); err != nil {
				r.err = err
			} else {
				r.events.Add(int64(len(c)))
			}
		}
		r.free <- c[:0]
	}
	for {
		select {
		case c := <-r.full:
			write(c)
		case <-tick.C:
			// Flush what has gathered, if a free buffer can take its place.
			// A recorder holding the lock may be waiting for this goroutine
			// to free a buffer, so never wait for the lock here.
			if !r.mu.TryLock() {
				continue
			}
			var c []trace.Event
			if len(r.cur) > 0 {
				select {
				case nb := <-r.free:
					c, r.cur = r.cur, nb
				default:
				}
			}
			r.mu.Unlock()
			if c != nil {
				write(c)
			}
		case <-r.stop:
			for {
				select {
				case c := <-r.full:
					write(c)
				default:
					return
				}
			}
		}
	}
}

// Close writes every recorded event, ends the stream and closes it.
// Record must not be called after Close.
func (r *Recorder) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return r.err
	}
	r.closed = true
	r.full <- r.cur
	r.cur = nil
	r.mu.Unlock()
	close(r.stop)
	<-r.done
	if err := r.w.Close(); err != nil && r.err == nil {
		r.err = err
	}
	if r.err != nil {
		return fmt.Errorf("recording rank %d: %w", r.rank, r.err)
	}
	return nil
}
