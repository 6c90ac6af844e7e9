package analyze

import (
	"cmp"
	"slices"

	"github.com/commprof/commprof/trace"
)

// EventRef names one event of a run: ranks[Rank][Index] in the slice of
// ranks it was found in.
type EventRef struct {
	Rank  int32
	Index int
}

// Link is one message: the send that put it on the wire and the receive
// that took it off.
type Link struct {
	Send, Recv EventRef
}

// MatchMessages pairs every send with its receive. ranks[r] holds rank r's
// events, in any order; a send on rank S to peer D belongs to a receive on
// rank D from peer S with the same communicator, collective name, sequence
// number and chunk. When several messages share all of these, the sends
// and the receives are paired in order of start time. A message whose
// other side is missing (a rank killed mid-run, a cut stream) has no link.
//
// Links come in the order of their sends: rank by rank, and by index within
// a rank. MatchMessages only reads ranks.
//
// The work is a few linear passes and a sort of each rank pair's messages,
// which are nearly in order already as recorded: no map is keyed by
// message and no string is built or hashed per event.
func MatchMessages(ranks [][]trace.Event) []Link {
	var nsend, nrecv int
	for _, evs := range ranks {
		for i := range evs {
			switch evs[i].Kind {
			case trace.KindSend:
				nsend++
			case trace.KindRecv:
				nrecv++
			}
		}
	}
	if nsend == 0 || nrecv == 0 {
		return nil
	}

	// Both sides, with the number of their (sender, receiver) pair.
	ops, pairs := newNumbers[opKey](), newNumbers[[2]int32]()
	sends, recvs := make([]side, 0, nsend), make([]side, 0, nrecv)
	sendPair, recvPair := make([]int32, 0, nsend), make([]int32, 0, nrecv)
	for r, evs := range ranks {
		for i := range evs {
			e := &evs[i]
			if e.Kind != trace.KindSend && e.Kind != trace.KindRecv {
				continue
			}
			s := side{op: ops.get(opKey{e.Name, e.Comm}), chunk: e.Chunk, seq: e.Seq, start: e.Start, rank: int32(r), index: int32(i)}
			if e.Kind == trace.KindSend {
				s.send = int32(len(sends))
				sends = append(sends, s)
				sendPair = append(sendPair, pairs.get([2]int32{int32(r), e.Peer}))
			} else {
				recvs = append(recvs, s)
				recvPair = append(recvPair, pairs.get([2]int32{e.Peer, int32(r)}))
			}
		}
	}
	npairs := len(pairs.ids)
	sends, sendOff := groupBy(sends, sendPair, npairs)
	recvs, recvOff := groupBy(recvs, recvPair, npairs)

	recvOf := make([]EventRef, len(sends)) // by send number
	for i := range recvOf {
		recvOf[i].Rank = -1
	}
	n := 0
	for p := range npairs {
		ss, rs := sends[sendOff[p]:sendOff[p+1]], recvs[recvOff[p]:recvOff[p+1]]
		if len(ss) == 0 || len(rs) == 0 {
			continue
		}
		slices.SortFunc(ss, compareSides)
		slices.SortFunc(rs, compareSides)
		// Walk both sorted runs together: within a key, both sides are in
		// start order and pair one to one.
		for i, j := 0, 0; i < len(ss) && j < len(rs); {
			s, r := &ss[i], &rs[j]
			switch c := compareKeys(s, r); {
			case c == 0:
				recvOf[s.send] = EventRef{r.rank, int(r.index)}
				n++
				i++
				j++
			case c < 0:
				i++
			default:
				j++
			}
		}
	}

	links := make([]Link, 0, n)
	k := 0
	for r, evs := range ranks {
		for i := range evs {
			if evs[i].Kind != trace.KindSend {
				continue
			}
			if recvOf[k].Rank >= 0 {
				links = append(links, Link{Send: EventRef{int32(r), i}, Recv: recvOf[k]})
			}
			k++
		}
	}
	return links
}

// side is one side of a message: what it shares with its other side
// (besides the rank pair, by which sides are grouped) and where it is.
type side struct {
	op    int32 // the collective's name and communicator, numbered
	chunk int32
	seq   int64
	start int64
	rank  int32 // the event's rank and index there
	index int32
	send  int32 // a send's number in scan order
}

// compareKeys orders sides by what a send and its receive share.
func compareKeys(a, b *side) int {
	if c := cmp.Compare(a.op, b.op); c != 0 {
		return c
	}
	if c := cmp.Compare(a.seq, b.seq); c != 0 {
		return c
	}
	return cmp.Compare(a.chunk, b.chunk)
}

// compareSides orders sides by key, then start, then position.
func compareSides(a, b side) int {
	if c := compareKeys(&a, &b); c != 0 {
		return c
	}
	if c := cmp.Compare(a.start, b.start); c != 0 {
		return c
	}
	if c := cmp.Compare(a.rank, b.rank); c != 0 {
		return c
	}
	return cmp.Compare(a.index, b.index)
}

// opKey is a collective name on a communicator.
type opKey struct{ name, comm string }

// numbers gives each distinct key a dense number: the (name, comm) of a
// collective, the (sender, receiver) of a message. Consecutive events
// mostly share their key, so the last one is remembered and the map is
// consulted only when it changes.
type numbers[K comparable] struct {
	ids  map[K]int32
	last K
	id   int32
}

func newNumbers[K comparable]() *numbers[K] { return &numbers[K]{ids: map[K]int32{}, id: -1} }

func (o *numbers[K]) get(k K) int32 {
	if o.id >= 0 && k == o.last {
		return o.id
	}
	id, ok := o.ids[k]
	if !ok {
		id = int32(len(o.ids))
		o.ids[k] = id
	}
	o.last, o.id = k, id
	return id
}

// groupBy returns s reordered by group, keeping the order within a group
// (a counting sort), and where each group starts: group g is
// out[off[g]:off[g+1]].
func groupBy(s []side, group []int32, ngroups int) (out []side, off []int32) {
	off = make([]int32, ngroups+1)
	for _, g := range group {
		off[g+1]++
	}
	for g := range ngroups {
		off[g+1] += off[g]
	}
	next := slices.Clone(off[:ngroups])
	out = make([]side, len(s))
	for i, g := range group {
		out[next[g]] = s[i]
		next[g]++
	}
	return out, off
}
