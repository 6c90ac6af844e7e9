package inject

import (
	"context"
	"os"
	"sync/atomic"
	"syscall"

	"github.com/commprof/commprof/collectives"
)

// MarkFault is the mark a rank records just before a hang, mismatch or
// kill fault acts, with the collective call's number (At) as its value.
const MarkFault = "inject.fault"

// callEnterer is what a recording communicator offers to show a call as
// entered (interpose.Comm writes the rank's in-flight state): a kill
// fault enters the call before it kills the rank, so the rank dies inside
// it as a rank killed mid-call does.
type callEnterer interface {
	EnterCall(op collectives.Op, buf collectives.Buffer, root int)
}

// callFaults counts a rank's collective calls, over all its
// communicators, and at a fault's call hangs, mismatches or kills.
type callFaults struct {
	faults []Fault
	calls  atomic.Int64
	mark   func(string, float64)
}

// faultComm applies callFaults to one communicator.
type faultComm struct {
	collectives.Communicator
	f *callFaults
}

func (p Plan) wrapCallFaults(c collectives.Communicator, mark func(string, float64)) collectives.Communicator {
	var fs []Fault
	for _, f := range p.Faults {
		if f.Kind == Hang || f.Kind == Mismatch || f.Kind == Kill {
			fs = append(fs, f)
		}
	}
	if len(fs) == 0 {
		return c
	}
	return &faultComm{Communicator: c, f: &callFaults{faults: fs, mark: mark}}
}

// due returns the fault of this call, if any.
func (c *faultComm) due() *Fault {
	n := int(c.f.calls.Add(1))
	for i := range c.f.faults {
		if c.f.faults[i].At == n {
			return &c.f.faults[i]
		}
	}
	return nil
}

// act applies f in place of the call op on buf (root for a rooted one);
// handled is false when the program's call is to be made as it is.
func (c *faultComm) act(ctx context.Context, f *Fault, op collectives.Op, buf collectives.Buffer, root int) (handled bool, err error) {
	if f == nil {
		return false, nil
	}
	c.f.mark(MarkFault, float64(f.At))
	switch f.Kind {
	case Hang:
		<-ctx.Done() // for good: only the end of the job ends it
		return true, ctx.Err()
	case Kill:
		if e, ok := c.Communicator.(callEnterer); ok {
			e.EnterCall(op, buf, root)
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not caught: this is not reached
	}
	// A mismatch: another call in its place.
	switch f.Call {
	case MismatchBroadcast:
		return true, c.Communicator.Broadcast(ctx, buf, 0)
	case MismatchBarrier:
		return true, c.Communicator.Barrier(ctx)
	case MismatchAllReduce:
		if buf.Len() == 0 {
			buf = collectives.NewBuffer(collectives.Float32, 1)
		}
		return true, c.Communicator.AllReduce(ctx, buf, collectives.Sum)
	}
	// Half the bytes: the same call on the first half of the buffer.
	half := buf.Slice(0, buf.Len()/2)
	switch op {
	case collectives.OpAllReduce:
		return true, c.Communicator.AllReduce(ctx, half, collectives.Sum)
	case collectives.OpBroadcast:
		return true, c.Communicator.Broadcast(ctx, half, root)
	case collectives.OpReduce:
		return true, c.Communicator.Reduce(ctx, half, collectives.Sum, root)
	}
	return false, nil
}

// AllReduce implements collectives.Communicator.
func (c *faultComm) AllReduce(ctx context.Context, buf collectives.Buffer, op collectives.ReduceOp) error {
	if ok, err := c.act(ctx, c.due(), collectives.OpAllReduce, buf, -1); ok {
		return err
	}
	return c.Communicator.AllReduce(ctx, buf, op)
}

// IAllReduce implements collectives.Communicator.
func (c *faultComm) IAllReduce(ctx context.Context, buf collectives.Buffer, op collectives.ReduceOp) collectives.Request {
	if ok, err := c.act(ctx, c.due(), collectives.OpAllReduce, buf, -1); ok {
		return failedRequest(err)
	}
	return c.Communicator.IAllReduce(ctx, buf, op)
}

// Broadcast implements collectives.Communicator.
func (c *faultComm) Broadcast(ctx context.Context, buf collectives.Buffer, root int) error {
	if ok, err := c.act(ctx, c.due(), collectives.OpBroadcast, buf, root); ok {
		return err
	}
	return c.Communicator.Broadcast(ctx, buf, root)
}

// IBroadcast implements collectives.Communicator.
func (c *faultComm) IBroadcast(ctx context.Context, buf collectives.Buffer, root int) collectives.Request {
	if ok, err := c.act(ctx, c.due(), collectives.OpBroadcast, buf, root); ok {
		return failedRequest(err)
	}
	return c.Communicator.IBroadcast(ctx, buf, root)
}

// Reduce implements collectives.Communicator.
func (c *faultComm) Reduce(ctx context.Context, buf collectives.Buffer, op collectives.ReduceOp, root int) error {
	if ok, err := c.act(ctx, c.due(), collectives.OpReduce, buf, root); ok {
		return err
	}
	return c.Communicator.Reduce(ctx, buf, op, root)
}

// AllGather implements collectives.Communicator.
func (c *faultComm) AllGather(ctx context.Context, in, out collectives.Buffer) error {
	if ok, err := c.act(ctx, c.due(), collectives.OpAllGather, out, -1); ok {
		return err
	}
	return c.Communicator.AllGather(ctx, in, out)
}

// ReduceScatter implements collectives.Communicator.
func (c *faultComm) ReduceScatter(ctx context.Context, in, out collectives.Buffer, op collectives.ReduceOp) error {
	if ok, err := c.act(ctx, c.due(), collectives.OpReduceScatter, in, -1); ok {
		return err
	}
	return c.Communicator.ReduceScatter(ctx, in, out, op)
}

// Barrier implements collectives.Communicator.
func (c *faultComm) Barrier(ctx context.Context) error {
	if ok, err := c.act(ctx, c.due(), collectives.OpBarrier, collectives.Buffer{}, -1); ok {
		return err
	}
	return c.Communicator.Barrier(ctx)
}

// Split implements collectives.Communicator: calls on the
// sub-communicator count too. The split itself is not counted, as the
// trace does not number it.
func (c *faultComm) Split(ctx context.Context, color, key int) (collectives.Communicator, error) {
	sub, err := c.Communicator.Split(ctx, color, key)
	if err != nil || sub == nil {
		return sub, err
	}
	return &faultComm{Communicator: sub, f: c.f}, nil
}
