package collectives

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// NewLocal returns the transports of an in-process world of n ranks, one per
// rank, for tests and single-process use. Messages are copied straight into
// a posted receive, or buffered until one is posted.
func NewLocal(n int) []Transport {
	w := &localWorld{boxes: make([][]*mailbox, n), closed: make([]atomic.Bool, n)}
	ts := make([]Transport, n)
	for dst := range n {
		w.boxes[dst] = make([]*mailbox, n)
		for src := range n {
			w.boxes[dst][src] = newMailbox(src)
		}
		ts[dst] = &localTransport{w: w, rank: dst}
	}
	return ts
}

type localWorld struct {
	boxes  [][]*mailbox // boxes[dst][src]
	closed []atomic.Bool
}

type localTransport struct {
	w    *localWorld
	rank int
}

func (t *localTransport) Rank() int { return t.rank }
func (t *localTransport) Size() int { return len(t.w.boxes) }

func (t *localTransport) Send(ctx context.Context, to int, h Header, p []byte) error {
	if to < 0 || to >= len(t.w.boxes) {
		return fmt.Errorf("send to rank %d: no such rank in a world of %d", to, len(t.w.boxes))
	}
	if t.w.closed[t.rank].Load() {
		return ErrClosed
	}
	if t.w.closed[to].Load() {
		return &PeerError{Rank: to, Reporter: -1, Reason: "transport closed"}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	t.w.boxes[to][t.rank].deliver(h, p, nil, time.Now())
	return nil
}

func (t *localTransport) Post(from int, h Header, p []byte) Receive {
	if from < 0 || from >= len(t.w.boxes) {
		return failedReceive{fmt.Errorf("recv from rank %d: no such rank in a world of %d", from, len(t.w.boxes))}
	}
	return t.w.boxes[t.rank][from].post(h, p)
}

// Close makes every receive from this rank, on any rank, fail.
func (t *localTransport) Close() error {
	if t.w.closed[t.rank].Swap(true) {
		return nil
	}
	for dst := range t.w.boxes {
		if dst == t.rank {
			for _, b := range t.w.boxes[dst] {
				b.fail(ErrClosed)
			}
			continue
		}
		t.w.boxes[dst][t.rank].fail(&PeerError{Rank: t.rank, Reporter: -1, Reason: "transport closed"})
	}
	return nil
}

// NewLoopback joins n ranks of this process over loopback TCP: the world
// of NewLocal, but through real sockets and the real rendezvous, for tests
// and examples. It returns each rank's transport and the job's peers. On
// error the transports that were made are closed.
func NewLoopback(ctx context.Context, n int, cfg TCPConfig) ([]*TCP, []Peer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	ts := make([]*TCP, n)
	peers := make([][]Peer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			jc := JoinConfig{Rank: r, Size: n, Coord: ln.Addr().String(), Secret: "loopback", Timeout: 20 * time.Second, TCP: cfg,
				Transport: TransportTCP}
			if r == 0 {
				jc.CoordListener = ln
			}
			var m *Mesh
			if m, peers[r], errs[r] = Join(ctx, jc); m != nil {
				ts[r] = m.tcp
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, t := range ts {
			if t != nil {
				t.Close()
			}
		}
		return nil, nil, err
	}
	return ts, peers[0], nil
}
