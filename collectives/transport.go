package collectives

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Header describes one message: which communicator and collective it belongs
// to and where in the algorithm it sits. Transports carry it with the payload
// and match a message to a receive by (Comm, P2P, Seq); Op, Algo and Chunk are
// checked on arrival so that ranks that disagree are caught.
type Header struct {
	Comm  uint32 // communicator id (0 is the world)
	Seq   uint64 // the collective's sequence number on Comm, or the user tag of a point-to-point message
	Op    Op     // the collective the message belongs to; OpSendRecv for user point-to-point
	Algo  Algo   // the algorithm that sends it
	DType DType  // element type of the payload
	Chunk int32  // the algorithm's step index inside the collective
}

func (h Header) p2p() bool { return h.Op == OpSendRecv }

// RecvInfo reports how a receive completed.
type RecvInfo struct {
	// Arrived is when the first byte (the frame header) of the message
	// reached this process. If it is before the receive was posted, the
	// message waited in the transport; if after, the receiver waited for
	// the sender.
	Arrived time.Time
	// Done is when the whole message was in the posted buffer, stamped by
	// the goroutine that put it there: the receive's true end, however
	// late the waiting goroutine runs after it.
	Done time.Time
}

// Transport moves messages between the ranks of one job. Implementations are
// safe for concurrent use: any number of goroutines may send and receive at
// once, and messages with different headers never mix.
//
// Send returns once p may be reused. Post registers a receive of a message
// from peer with a matching header into p and returns at once; the
// message must have exactly len(p) bytes, and p must not be touched until
// the Receive's Wait returns. Posting before the peer sends lets the
// transport read the message straight into p. Messages from one peer with
// the same (Comm, Seq) are matched to receives in the order they were sent
// and posted.
//
// When a peer fails, every pending and later Send and receive returns a
// *PeerError naming it.
type Transport interface {
	Rank() int
	Size() int
	Send(ctx context.Context, to int, h Header, p []byte) error
	Post(from int, h Header, p []byte) Receive
	// Close releases the transport's connections. Pending calls fail.
	Close() error
}

// Receive is a posted receive.
type Receive interface {
	// Wait blocks until the message has been received into the posted
	// buffer, or ctx ends (the receive is then withdrawn). Call it exactly
	// once.
	Wait(ctx context.Context) (RecvInfo, error)
}

// Recv posts a receive on t and waits for it.
func Recv(ctx context.Context, t Transport, from int, h Header, p []byte) (RecvInfo, error) {
	return t.Post(from, h, p).Wait(ctx)
}

// failedReceive is a receive that could not be posted.
type failedReceive struct{ err error }

func (f failedReceive) Wait(context.Context) (RecvInfo, error) { return RecvInfo{}, f.err }

// PeerError reports that a peer of this rank failed or broke the protocol.
type PeerError struct {
	Rank     int    // the rank that failed
	Reporter int    // the rank that saw the failure first, if not this one; else -1
	Reason   string // what was seen: "connection closed", "no heartbeat for 10s", ...
	Err      error  // underlying error, if any
}

func (e *PeerError) Error() string {
	s := fmt.Sprintf("rank %d failed: %s", e.Rank, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	if e.Reporter >= 0 {
		s += fmt.Sprintf(" (reported by rank %d)", e.Reporter)
	}
	return s
}

func (e *PeerError) Unwrap() error { return e.Err }

// MismatchError reports that ranks called collectives that do not agree: a
// different operation, a different buffer length or a different algorithm
// at the same sequence number.
type MismatchError struct {
	Peer   int
	Header Header // what this rank expected
	Got    Header // what the peer sent
	Want   int    // bytes this rank expected
	Len    int    // bytes the peer sent
}

func (e *MismatchError) Error() string {
	w, g := e.Header, e.Got
	where := fmt.Sprintf("%s #%d on communicator %d", w.Op, w.Seq, w.Comm)
	if w.p2p() {
		where = fmt.Sprintf("recv with tag %d on communicator %d", w.Seq, w.Comm)
	}
	switch {
	case g.Op != w.Op:
		return fmt.Sprintf("collective mismatch in %s: rank %d called %s; every rank must call the same collectives in the same order", where, e.Peer, g.Op)
	case g.Algo != w.Algo:
		return fmt.Sprintf("algorithm mismatch in %s: rank %d uses %s, this rank %s; set the same algorithm and thresholds on every rank", where, e.Peer, g.Algo, w.Algo)
	case g.DType != w.DType:
		return fmt.Sprintf("type mismatch in %s: rank %d sent %s, this rank expects %s", where, e.Peer, g.DType, w.DType)
	case e.Len != e.Want:
		return fmt.Sprintf("size mismatch in %s: rank %d sent %d bytes where this rank expects %d; do all ranks pass buffers of the same length?", where, e.Peer, e.Len, e.Want)
	default:
		return fmt.Sprintf("protocol mismatch in %s: rank %d sent step %d where this rank expects step %d", where, e.Peer, g.Chunk, w.Chunk)
	}
}

// ErrClosed is returned by calls on a transport that was closed locally.
var ErrClosed = errors.New("transport closed")

// check compares an arriving message with the receive it matched.
func check(peer int, want Header, wantLen int, got Header, gotLen int) error {
	if got.Op != want.Op || got.Algo != want.Algo || got.DType != want.DType || got.Chunk != want.Chunk || gotLen != wantLen {
		return &MismatchError{Peer: peer, Header: want, Got: got, Want: wantLen, Len: gotLen}
	}
	return nil
}
