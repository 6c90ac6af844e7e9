package collectives

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

// TestMailboxMatchesInOrder: receives and messages meet in the order they
// were posted and delivered, key by key, whichever of the two comes first
// and however the keys interleave; a receive withdrawn before its message
// came takes none; a failure completes every receive still posted. The
// first receive or message of an otherwise empty mailbox waits outside its
// maps, so the interleavings cover that place and the maps in every order.
func TestMailboxMatchesInOrder(t *testing.T) {
	keys := []Header{
		{Comm: 0, Seq: 1, Op: OpAllReduce, Algo: AlgoRing, DType: Float32},
		{Comm: 0, Seq: 2, Op: OpAllReduce, Algo: AlgoRing, DType: Float32},
		{Comm: 7, Seq: 1, Op: OpAllReduce, Algo: AlgoRing, DType: Float32},
		{Comm: 0, Seq: 1, Op: OpSendRecv, Algo: AlgoDirect, DType: Float32}, // a user tag equal to a collective's sequence number
	}
	const perKey = 6
	rng := rand.New(rand.NewPCG(17, 3))
	ctx := context.Background()
	for trial := range 300 {
		m := newMailbox(1)
		nkeys := 1 + rng.IntN(len(keys))
		type recv struct {
			r   *recvReq
			buf []byte
			key int
			idx int
		}
		var recvs []recv
		posted, sent := make([]int, nkeys), make([]int, nkeys)
		for left := 2 * nkeys * perKey; left > 0; {
			k := rng.IntN(nkeys)
			if rng.IntN(2) == 0 && posted[k] < perKey {
				buf := make([]byte, 16)
				r := m.post(keys[k], buf)
				if rng.IntN(5) == 0 && len(r.done) == 0 {
					// Withdrawn at once: the next receive of its key takes
					// the message it would have.
					if !m.unpost(keyOf(keys[k]), r) {
						t.Fatalf("trial %d: a receive nothing matched could not be withdrawn", trial)
					}
					r.release()
					continue
				}
				recvs = append(recvs, recv{r, buf, k, posted[k]})
				posted[k]++
				left--
			} else if sent[k] < perKey {
				p := make([]byte, 16)
				binary.LittleEndian.PutUint64(p, uint64(k))
				binary.LittleEndian.PutUint64(p[8:], uint64(sent[k]))
				m.deliver(keys[k], p, nil, m.now())
				sent[k]++
				left--
			}
		}
		for _, rc := range recvs {
			if _, err := rc.r.Wait(ctx); err != nil {
				t.Fatalf("trial %d: receive %d of key %d: %v", trial, rc.idx, rc.key, err)
			}
			k, i := binary.LittleEndian.Uint64(rc.buf), binary.LittleEndian.Uint64(rc.buf[8:])
			if int(k) != rc.key || int(i) != rc.idx {
				t.Fatalf("trial %d: receive %d of key %d got message %d of key %d", trial, rc.idx, rc.key, i, k)
			}
		}
		// Receives nobody sends to are completed by the peer's failure.
		var late []*recvReq
		for k := range nkeys {
			late = append(late, m.post(keys[k], make([]byte, 16)))
		}
		boom := errors.New("peer gone")
		m.fail(boom)
		for _, r := range late {
			if _, err := r.Wait(ctx); !errors.Is(err, boom) {
				t.Fatalf("trial %d: a receive posted before the failure: %v, want %v", trial, err, boom)
			}
		}
		if _, err := m.post(keys[0], make([]byte, 16)).Wait(ctx); !errors.Is(err, boom) {
			t.Fatalf("trial %d: a receive posted after the failure: %v", trial, err)
		}
	}
}
