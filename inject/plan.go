package inject

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname

	"github.com/commprof/commprof/collectives"
)

// MarkDelay is the mark a delayed rank records as each delay starts, with
// the delay in ns as its value: the truth a report can be checked against.
const MarkDelay = "inject.delay"

// MarkStall is the mark a stalled rank records, once it runs again, at the
// time each stop began, with how long it was stopped in ns as its value.
const MarkStall = "inject.stall"

// nanotime is the runtime's monotonic clock (CLOCK_MONOTONIC on Linux):
// the clock recordings are stamped with, the same for every process of a
// host.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

func monotonic() int64 { return nanotime() }

// Plan is the part of a job's faults that one rank applies to itself.
type Plan struct {
	Rank   int
	Faults []Fault // those that involve this rank
}

// ForRank returns the faults rank applies.
func ForRank(faults []Fault, rank int) Plan {
	p := Plan{Rank: rank}
	for _, f := range faults {
		if (f.Kind == Link && f.From == rank) || (f.Kind != Link && f.Rank == rank) {
			p.Faults = append(p.Faults, f)
		}
	}
	return p
}

// Empty reports whether the rank has nothing to apply.
func (p Plan) Empty() bool { return len(p.Faults) == 0 }

// WrapTransport returns t with this rank's slow links applied to its
// sends, or t itself when it has none.
func (p Plan) WrapTransport(t collectives.Transport) collectives.Transport {
	links := map[int]*link{}
	for _, f := range p.Faults {
		if f.Kind == Link {
			links[f.To] = &link{latency: f.Latency, rate: f.Rate}
		}
	}
	if len(links) == 0 {
		return t
	}
	return &slowTransport{Transport: t, links: links}
}

// slowTransport holds back the messages this rank sends over slow links.
type slowTransport struct {
	collectives.Transport
	links map[int]*link // by destination
}

// link paces the messages to one peer: each takes len/rate of the link
// (messages queue behind each other) and then latency more.
type link struct {
	latency time.Duration
	rate    float64 // bytes/s, 0 for none
	mu      sync.Mutex
	free    time.Time // when the link has sent everything before
}

func (l *link) due(n int) time.Time {
	now := time.Now()
	if l.rate <= 0 {
		return now.Add(l.latency)
	}
	l.mu.Lock()
	start := now
	if l.free.After(start) {
		start = l.free
	}
	end := start.Add(time.Duration(float64(n) / l.rate * 1e9))
	l.free = end
	l.mu.Unlock()
	return end.Add(l.latency)
}

// Send implements collectives.Transport: a message over a slow link
// leaves when the link would have delivered it; the sender is blocked
// until then, as behind a full socket buffer.
func (s *slowTransport) Send(ctx context.Context, to int, h collectives.Header, p []byte) error {
	if l := s.links[to]; l != nil {
		if err := sleepUntil(ctx, l.due(len(p))); err != nil {
			return err
		}
	}
	return s.Transport.Send(ctx, to, h, p)
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WrapComm returns c with this rank's delays applied before its
// communication calls, or c itself when it has none. mark records a mark
// on the rank's trace (nil for none).
func (p Plan) WrapComm(c collectives.Communicator, mark func(name string, v float64)) collectives.Communicator {
	if mark == nil {
		mark = func(string, float64) {}
	}
	c = p.wrapCallFaults(c, mark)
	var ds []*delayer
	for _, f := range p.Faults {
		if f.Kind == Delay {
			ds = append(ds, &delayer{f: f, next: time.Now().Add(f.Period)})
		}
	}
	if len(ds) == 0 {
		return c
	}
	if mark == nil {
		mark = func(string, float64) {}
	}
	return &delayComm{Communicator: c, d: &delays{ds: ds, mark: mark}}
}

type delays struct {
	ds   []*delayer
	mark func(string, float64)
}

type delayer struct {
	f     Fault
	calls atomic.Int64
	mu    sync.Mutex
	next  time.Time // by period: the next delay is due at the first call after it
}

// before runs before each communication call of the rank.
func (d *delays) before(ctx context.Context) error {
	var total time.Duration
	for _, x := range d.ds {
		if x.f.Every > 0 {
			if x.calls.Add(1)%int64(x.f.Every) == 0 {
				total += x.f.Dur
			}
			continue
		}
		x.mu.Lock()
		if now := time.Now(); !now.Before(x.next) {
			total += x.f.Dur
			for !x.next.After(now) {
				x.next = x.next.Add(x.f.Period)
			}
		}
		x.mu.Unlock()
	}
	if total <= 0 {
		return nil
	}
	d.mark(MarkDelay, float64(total))
	return sleepUntil(ctx, time.Now().Add(total))
}

// delayComm holds its rank back before communication calls.
type delayComm struct {
	collectives.Communicator
	d *delays
}

// AllReduce implements collectives.Communicator.
func (c *delayComm) AllReduce(ctx context.Context, buf collectives.Buffer, op collectives.ReduceOp) error {
	if err := c.d.before(ctx); err != nil {
		return err
	}
	return c.Communicator.AllReduce(ctx, buf, op)
}

// IAllReduce implements collectives.Communicator.
func (c *delayComm) IAllReduce(ctx context.Context, buf collectives.Buffer, op collectives.ReduceOp) collectives.Request {
	if err := c.d.before(ctx); err != nil {
		return failedRequest(err)
	}
	return c.Communicator.IAllReduce(ctx, buf, op)
}

// Broadcast implements collectives.Communicator.
func (c *delayComm) Broadcast(ctx context.Context, buf collectives.Buffer, root int) error {
	if err := c.d.before(ctx); err != nil {
		return err
	}
	return c.Communicator.Broadcast(ctx, buf, root)
}

// IBroadcast implements collectives.Communicator.
func (c *delayComm) IBroadcast(ctx context.Context, buf collectives.Buffer, root int) collectives.Request {
	if err := c.d.before(ctx); err != nil {
		return failedRequest(err)
	}
	return c.Communicator.IBroadcast(ctx, buf, root)
}

// Reduce implements collectives.Communicator.
func (c *delayComm) Reduce(ctx context.Context, buf collectives.Buffer, op collectives.ReduceOp, root int) error {
	if err := c.d.before(ctx); err != nil {
		return err
	}
	return c.Communicator.Reduce(ctx, buf, op, root)
}

// AllGather implements collectives.Communicator.
func (c *delayComm) AllGather(ctx context.Context, in, out collectives.Buffer) error {
	if err := c.d.before(ctx); err != nil {
		return err
	}
	return c.Communicator.AllGather(ctx, in, out)
}

// ReduceScatter implements collectives.Communicator.
func (c *delayComm) ReduceScatter(ctx context.Context, in, out collectives.Buffer, op collectives.ReduceOp) error {
	if err := c.d.before(ctx); err != nil {
		return err
	}
	return c.Communicator.ReduceScatter(ctx, in, out, op)
}

// Barrier implements collectives.Communicator.
func (c *delayComm) Barrier(ctx context.Context) error {
	if err := c.d.before(ctx); err != nil {
		return err
	}
	return c.Communicator.Barrier(ctx)
}

// Send implements collectives.Communicator.
func (c *delayComm) Send(ctx context.Context, buf collectives.Buffer, to, tag int) error {
	if err := c.d.before(ctx); err != nil {
		return err
	}
	return c.Communicator.Send(ctx, buf, to, tag)
}

// Recv implements collectives.Communicator.
func (c *delayComm) Recv(ctx context.Context, buf collectives.Buffer, from, tag int) error {
	if err := c.d.before(ctx); err != nil {
		return err
	}
	return c.Communicator.Recv(ctx, buf, from, tag)
}

// Split implements collectives.Communicator: the sub-communicator is
// delayed too, counting calls with this one.
func (c *delayComm) Split(ctx context.Context, color, key int) (collectives.Communicator, error) {
	sub, err := c.Communicator.Split(ctx, color, key)
	if err != nil || sub == nil {
		return sub, err
	}
	return &delayComm{Communicator: sub, d: c.d}, nil
}

// failedReq is the request of a call that never started.
type failedReq struct {
	err  error
	done chan struct{}
	at   time.Time
}

func failedRequest(err error) collectives.Request {
	r := &failedReq{err: err, done: make(chan struct{}), at: time.Now()}
	close(r.done)
	return r
}

func (r *failedReq) Wait() error           { return r.err }
func (r *failedReq) Done() <-chan struct{} { return r.done }
func (r *failedReq) Completed() time.Time  { return r.at }
