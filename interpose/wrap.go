package interpose

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/trace"
)

// comms names communicators by id for the events of their messages.
type comms struct{ names sync.Map } // uint32 -> string

func (c *comms) name(id uint32) string {
	if v, ok := c.names.Load(id); ok {
		return v.(string)
	}
	if id == 0 {
		return "world"
	}
	n := fmt.Sprintf("comm-%08x", id)
	c.names.Store(id, n)
	return n
}

// Transport records every message that passes through it.
type Transport struct {
	inner collectives.Transport
	rec   *Recorder
	comms *comms
}

var _ collectives.Transport = (*Transport)(nil)

// WrapTransport returns a transport that records each Send as a send event
// and each completed receive as a recv event.
func WrapTransport(t collectives.Transport, rec *Recorder) *Transport {
	return &Transport{inner: t, rec: rec, comms: &comms{}}
}

// Rank implements collectives.Transport.
func (t *Transport) Rank() int { return t.inner.Rank() }

// Size implements collectives.Transport.
func (t *Transport) Size() int { return t.inner.Size() }

// Close implements collectives.Transport.
func (t *Transport) Close() error { return t.inner.Close() }

// Inner returns the wrapped transport.
func (t *Transport) Inner() collectives.Transport { return t.inner }

func (t *Transport) event(k trace.Kind, h collectives.Header, peer, n int, start, end int64) trace.Event {
	return trace.Event{Kind: k, Name: h.Op.String(), Start: start, Dur: end - start, Bytes: int64(n),
		Peer: int32(peer), Seq: int64(h.Seq), Step: t.rec.Step(), Algo: h.Algo.String(), DType: h.DType.String(),
		Root: -1, Chunk: h.Chunk, Comm: t.comms.name(h.Comm)}
}

// Send implements collectives.Transport.
func (t *Transport) Send(ctx context.Context, to int, h collectives.Header, p []byte) error {
	start := t.rec.Now()
	err := t.inner.Send(ctx, to, h, p)
	if err == nil {
		e := t.event(trace.KindSend, h, to, len(p), start, t.rec.Now())
		t.rec.Record(&e)
	}
	return err
}

// Post implements collectives.Transport.
func (t *Transport) Post(from int, h collectives.Header, p []byte) collectives.Receive {
	r := recvPool.Get().(*receive)
	r.t, r.from, r.h, r.n = t, from, h, len(p)
	r.start = t.rec.Now()
	r.inner = t.inner.Post(from, h, p)
	return r
}

type receive struct {
	t     *Transport
	inner collectives.Receive
	from  int
	h     collectives.Header
	n     int
	start int64
}

var recvPool = sync.Pool{New: func() any { return new(receive) }}

// Wait implements collectives.Receive. The recv event spans from the post
// to the end of the copy; Wait is the part before the message's first
// byte arrived, that is, time spent waiting for the sender.
func (r *receive) Wait(ctx context.Context) (collectives.RecvInfo, error) {
	info, err := r.inner.Wait(ctx)
	t := r.t
	if err == nil {
		// The receive ended when the transport finished copying it in
		// (info.Done), not when this goroutine got to run again: with
		// ranks outnumbering cores that can be milliseconds later.
		end := t.rec.Now()
		if !info.Done.IsZero() {
			end = max(t.rec.At(info.Done), r.start)
		}
		e := t.event(trace.KindRecv, r.h, r.from, r.n, r.start, end)
		if !info.Arrived.IsZero() {
			if arrived := t.rec.At(info.Arrived); arrived > r.start {
				e.Wait = min(arrived-r.start, e.Dur)
			}
		}
		t.rec.Record(&e)
	}
	r.t, r.inner = nil, nil
	recvPool.Put(r)
	return info, err
}

// CollectiveTrace returns the hooks that record, as reduce events, the
// reductions the collectives run; set it in collectives.Config.Trace of
// the communicator that sends through t.
func (t *Transport) CollectiveTrace() *collectives.Trace {
	return &collectives.Trace{Reduced: func(h collectives.Header, n int, start, end time.Time) {
		s, e := t.rec.At(start), t.rec.At(end)
		ev := trace.Event{Kind: trace.KindReduce, Name: h.Op.String(), Start: s, Dur: max(e-s, 0), Bytes: int64(n),
			Peer: -1, Seq: int64(h.Seq), Step: t.rec.Step(), Algo: h.Algo.String(), DType: h.DType.String(),
			Root: -1, Chunk: h.Chunk, Comm: t.comms.name(h.Comm)}
		t.rec.Record(&ev)
	}}
}

// Comm records every collective called on it.
type Comm struct {
	inner collectives.Communicator
	rec   *Recorder
	comms *comms
	name  string
	world atomic.Pointer[[]int] // members, once worked out
}

var _ collectives.Communicator = (*Comm)(nil)

// WrapComm returns a communicator that records each collective call on c
// as a collective event. t is the recording transport c sends through, if
// any, so that messages of sub-communicators are named like them.
func WrapComm(c collectives.Communicator, rec *Recorder, t *Transport) *Comm {
	cs := &comms{}
	if t != nil {
		cs = t.comms
	}
	return &Comm{inner: c, rec: rec, comms: cs, name: "world"}
}

type seqer interface{ Seq() uint64 }

func (c *Comm) seq() int64 {
	if s, ok := c.inner.(seqer); ok {
		return int64(s.Seq())
	}
	return -1
}

// call is what a collective's event takes from the moment it was called.
type call struct {
	seq, start int64
	step       int32
}

func (c *Comm) begin() call { return call{seq: c.seq(), start: c.rec.Now(), step: c.rec.Step()} }

// enter begins a blocking call: its number, and the in-flight state
// showing the rank inside it until exit.
func (c *Comm) enter(op collectives.Op, buf collectives.Buffer, root int) call {
	k := c.begin()
	if fl := c.rec.InFlight(); fl != nil {
		dt := ""
		if buf.DType() != 0 {
			dt = buf.DType().String()
		}
		wroot := -1
		if root >= 0 {
			wroot = c.inner.WorldRank(root)
		}
		fl.Enter(op.String(), c.name, c.members(), k.seq, int64(len(buf.Bytes())), dt, wroot, k.start)
	}
	return k
}

// exit ends a blocking call in the in-flight state.
func (c *Comm) exit(err error) { c.rec.InFlight().Exit(c.rec.Now(), err) }

// members are the world ranks of the communicator, worked out once.
func (c *Comm) members() []int {
	if m := c.world.Load(); m != nil {
		return *m
	}
	m := make([]int, c.inner.Size())
	for i := range m {
		m[i] = c.inner.WorldRank(i)
	}
	c.world.Store(&m)
	return m
}

// EnterCall shows a call as entered in the in-flight state without making
// it: an injected kill (package inject) enters the call it kills the rank
// in.
func (c *Comm) EnterCall(op collectives.Op, buf collectives.Buffer, root int) { c.enter(op, buf, root) }

func (c *Comm) record(op collectives.Op, buf collectives.Buffer, root int, k call) {
	c.recordAt(op, buf, root, k, c.rec.Now())
}

// recordAt records a collective call that ended at end (a Now reading).
func (c *Comm) recordAt(op collectives.Op, buf collectives.Buffer, root int, k call, end int64) {
	n := len(buf.Bytes())
	dt := ""
	if buf.DType() != 0 {
		dt = buf.DType().String()
	}
	e := trace.Event{Kind: trace.KindCollective, Name: op.String(), Start: k.start, Dur: end - k.start,
		Bytes: int64(n), Peer: -1, Seq: k.seq, Step: k.step, Algo: c.inner.Algorithm(op, n).String(),
		DType: dt, Root: int32(root), Chunk: -1, Comm: c.name}
	c.rec.Record(&e)
}

// Rank implements collectives.Communicator.
func (c *Comm) Rank() int { return c.inner.Rank() }

// Size implements collectives.Communicator.
func (c *Comm) Size() int { return c.inner.Size() }

// Algorithm implements collectives.Communicator.
func (c *Comm) Algorithm(op collectives.Op, bytes int) collectives.Algo {
	return c.inner.Algorithm(op, bytes)
}

// WorldRank implements collectives.Communicator.
func (c *Comm) WorldRank(r int) int { return c.inner.WorldRank(r) }

// Recorder returns the recorder, for the program's own spans.
func (c *Comm) Recorder() *Recorder { return c.rec }

// AllReduce implements collectives.Communicator.
func (c *Comm) AllReduce(ctx context.Context, buf collectives.Buffer, op collectives.ReduceOp) error {
	k := c.enter(collectives.OpAllReduce, buf, -1)
	err := c.inner.AllReduce(ctx, buf, op)
	c.exit(err)
	if err == nil {
		c.record(collectives.OpAllReduce, buf, -1, k)
	}
	return err
}

// IAllReduce implements collectives.Communicator. The collective's event
// spans from the call to its completion as the collective stamped it;
// the program's Wait on the request is a wait event of its own.
func (c *Comm) IAllReduce(ctx context.Context, buf collectives.Buffer, op collectives.ReduceOp) collectives.Request {
	k := c.begin()
	return c.track(c.inner.IAllReduce(ctx, buf, op), collectives.OpAllReduce, buf, -1, k)
}

// request records a non-blocking collective: its event once it has
// completed (whoever sees that first, the program's Wait or a watcher),
// and the program's wait on it.
type request struct {
	inner  collectives.Request
	c      *Comm
	op     collectives.Op
	buf    collectives.Buffer
	root   int
	k      call
	once   sync.Once
	waited atomic.Bool
}

var _ collectives.Request = (*request)(nil)

func (c *Comm) track(req collectives.Request, op collectives.Op, buf collectives.Buffer, root int, k call) *request {
	r := &request{inner: req, c: c, op: op, buf: buf, root: root, k: k}
	// A program may never Wait (it may only watch Done), so a watcher
	// records the collective too; it stamps nothing itself, so however
	// late it runs the event is true.
	go func() {
		<-req.Done()
		r.finish()
	}()
	return r
}

func (r *request) finish() {
	r.once.Do(func() {
		if r.inner.Wait() != nil {
			return
		}
		end := r.c.rec.Now()
		if t := r.inner.Completed(); !t.IsZero() {
			end = r.c.rec.At(t)
		}
		r.c.recordAt(r.op, r.buf, r.root, r.k, max(end, r.k.start))
	})
}

// Wait implements collectives.Request; the first Wait is recorded as a
// wait event: the time the program was blocked on the collective.
func (r *request) Wait() error {
	first := !r.waited.Swap(true)
	start := r.c.rec.Now()
	err := r.inner.Wait()
	end := r.c.rec.Now()
	r.finish()
	if first && err == nil {
		n := len(r.buf.Bytes())
		e := trace.Event{Kind: trace.KindWait, Name: r.op.String(), Start: start, Dur: end - start, Bytes: int64(n),
			Peer: -1, Seq: r.k.seq, Step: r.c.rec.Step(), Algo: r.c.inner.Algorithm(r.op, n).String(),
			Root: int32(r.root), Chunk: -1, Comm: r.c.name}
		r.c.rec.Record(&e)
	}
	return err
}

// Done implements collectives.Request.
func (r *request) Done() <-chan struct{} { return r.inner.Done() }

// Completed implements collectives.Request.
func (r *request) Completed() time.Time { return r.inner.Completed() }

// Broadcast implements collectives.Communicator.
func (c *Comm) Broadcast(ctx context.Context, buf collectives.Buffer, root int) error {
	k := c.enter(collectives.OpBroadcast, buf, root)
	err := c.inner.Broadcast(ctx, buf, root)
	c.exit(err)
	if err == nil {
		c.record(collectives.OpBroadcast, buf, root, k)
	}
	return err
}

// IBroadcast implements collectives.Communicator.
func (c *Comm) IBroadcast(ctx context.Context, buf collectives.Buffer, root int) collectives.Request {
	k := c.begin()
	return c.track(c.inner.IBroadcast(ctx, buf, root), collectives.OpBroadcast, buf, root, k)
}

// Reduce implements collectives.Communicator.
func (c *Comm) Reduce(ctx context.Context, buf collectives.Buffer, op collectives.ReduceOp, root int) error {
	k := c.enter(collectives.OpReduce, buf, root)
	err := c.inner.Reduce(ctx, buf, op, root)
	c.exit(err)
	if err == nil {
		c.record(collectives.OpReduce, buf, root, k)
	}
	return err
}

// AllGather implements collectives.Communicator; bytes are the whole
// output buffer's, as nccl-tests counts them.
func (c *Comm) AllGather(ctx context.Context, in, out collectives.Buffer) error {
	k := c.enter(collectives.OpAllGather, out, -1)
	err := c.inner.AllGather(ctx, in, out)
	c.exit(err)
	if err == nil {
		c.record(collectives.OpAllGather, out, -1, k)
	}
	return err
}

// ReduceScatter implements collectives.Communicator; bytes are the whole
// input buffer's.
func (c *Comm) ReduceScatter(ctx context.Context, in, out collectives.Buffer, op collectives.ReduceOp) error {
	k := c.enter(collectives.OpReduceScatter, in, -1)
	err := c.inner.ReduceScatter(ctx, in, out, op)
	c.exit(err)
	if err == nil {
		c.record(collectives.OpReduceScatter, in, -1, k)
	}
	return err
}

// Barrier implements collectives.Communicator.
func (c *Comm) Barrier(ctx context.Context) error {
	k := c.enter(collectives.OpBarrier, collectives.Buffer{}, -1)
	err := c.inner.Barrier(ctx)
	c.exit(err)
	if err == nil {
		c.record(collectives.OpBarrier, collectives.Buffer{}, -1, k)
	}
	return err
}

// Send implements collectives.Communicator; the message is recorded by the
// transport.
func (c *Comm) Send(ctx context.Context, buf collectives.Buffer, to, tag int) error {
	return c.inner.Send(ctx, buf, to, tag)
}

// Recv implements collectives.Communicator.
func (c *Comm) Recv(ctx context.Context, buf collectives.Buffer, from, tag int) error {
	return c.inner.Recv(ctx, buf, from, tag)
}

type ider interface{ ID() uint32 }

// Split implements collectives.Communicator; the sub-communicator records
// too, named after this one and its color ("world/1").
func (c *Comm) Split(ctx context.Context, color, key int) (collectives.Communicator, error) {
	sub, err := c.inner.Split(ctx, color, key)
	if err != nil || sub == nil {
		return sub, err
	}
	name := fmt.Sprintf("%s/%d", c.name, color)
	if s, ok := sub.(ider); ok {
		c.comms.names.Store(s.ID(), name)
	}
	return &Comm{inner: sub, rec: c.rec, comms: c.comms, name: name}, nil
}
