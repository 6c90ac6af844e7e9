package web

import (
	"context"
	"errors"
	"time"
)

// errBusy is what a build that found no free slot in time returns: the
// server answers 503 with Retry-After.
var errBusy = errors.New("the server is busy")

// limiter bounds the expensive work in flight (reading a run, building a
// report, a timeline, a diff or a sweep page): at most cap(slots) builds
// at once, at most cap(queue) more waiting for a slot, each for at most
// wait. What it bounds is memory as much as time: every build holds the
// events it reads until it is done. It is safe for concurrent use.
type limiter struct {
	slots chan struct{}
	queue chan struct{}
	wait  time.Duration
}

func newLimiter(builds, queue int, wait time.Duration) *limiter {
	return &limiter{slots: make(chan struct{}, builds), queue: make(chan struct{}, queue), wait: wait}
}

// slotKey marks a context whose request holds a slot.
type slotKey struct{}

// acquire takes a slot for a build, waiting for one if the queue has
// room, and returns the context to build with and the function that
// gives the slot back. A build that already holds a slot (ctx says so:
// a report page that reads its run's summary) needs no other, so that
// nested builds never wait for each other. It returns errBusy when no
// slot frees in time or the queue is full, and ctx's error when ctx ends
// first.
func (l *limiter) acquire(ctx context.Context) (context.Context, func(), error) {
	if ctx.Value(slotKey{}) != nil {
		return ctx, func() {}, nil
	}
	release := func() { <-l.slots }
	held := context.WithValue(ctx, slotKey{}, true)
	select {
	case l.slots <- struct{}{}:
		return held, release, nil
	default:
	}
	select {
	case l.queue <- struct{}{}:
	default:
		return ctx, nil, errBusy
	}
	defer func() { <-l.queue }()
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return held, release, nil
	case <-t.C:
		return ctx, nil, errBusy
	case <-ctx.Done():
		return ctx, nil, ctx.Err()
	}
}

// inFlight returns the builds running and waiting now.
func (l *limiter) inFlight() (running, waiting int) {
	return len(l.slots), len(l.queue)
}
