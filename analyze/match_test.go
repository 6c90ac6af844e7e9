package analyze

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/commprof/commprof/trace"
)

// msg builds a send (or recv) event: on rank `on`, to (or from) peer.
func msg(kind trace.Kind, on, peer int32, name, comm string, seq int64, chunk int32, start int64) trace.Event {
	return trace.Event{Rank: on, Kind: kind, Name: name, Comm: comm, Seq: seq, Chunk: chunk, Peer: peer,
		Start: start, Dur: 10, Bytes: 64, Step: -1, Root: -1}
}

func send(from, to int32, seq int64, chunk int32, start int64) trace.Event {
	return msg(trace.KindSend, from, to, "allreduce", "world", seq, chunk, start)
}

func recv(on, from int32, seq int64, chunk int32, start int64) trace.Event {
	return msg(trace.KindRecv, on, from, "allreduce", "world", seq, chunk, start)
}

func ref(rank int32, i int) EventRef { return EventRef{rank, i} }

func TestMatchMessages(t *testing.T) {
	coll := trace.Event{Kind: trace.KindCollective, Name: "allreduce", Comm: "world", Seq: 0, Peer: -1, Chunk: -1}
	for _, tc := range []struct {
		name  string
		ranks [][]trace.Event
		want  []Link
	}{
		{name: "empty", ranks: nil, want: nil},
		{name: "no messages", ranks: [][]trace.Event{{coll}, {coll}}, want: nil},
		{
			name: "one each way",
			ranks: [][]trace.Event{
				{coll, send(0, 1, 0, 0, 100), recv(0, 1, 0, 0, 100)},
				{recv(1, 0, 0, 0, 90), coll, send(1, 0, 0, 0, 95)},
			},
			want: []Link{{ref(0, 1), ref(1, 0)}, {ref(1, 2), ref(0, 2)}},
		},
		{
			name: "events in any order",
			ranks: [][]trace.Event{
				{send(0, 1, 1, 1, 300), send(0, 1, 1, 0, 200), send(0, 1, 0, 0, 100)},
				{recv(1, 0, 0, 0, 100), recv(1, 0, 1, 0, 200), recv(1, 0, 1, 1, 300)},
			},
			want: []Link{{ref(0, 0), ref(1, 2)}, {ref(0, 1), ref(1, 1)}, {ref(0, 2), ref(1, 0)}},
		},
		{
			name: "every key field tells messages apart",
			ranks: [][]trace.Event{
				{
					msg(trace.KindSend, 0, 1, "allreduce", "world", 3, 0, 10),
					msg(trace.KindSend, 0, 1, "broadcast", "world", 3, 0, 10),
					msg(trace.KindSend, 0, 1, "allreduce", "comm-1", 3, 0, 10),
					msg(trace.KindSend, 0, 1, "allreduce", "world", 4, 0, 10),
					msg(trace.KindSend, 0, 1, "allreduce", "world", 3, 1, 10),
					msg(trace.KindSend, 0, 2, "allreduce", "world", 3, 0, 10),
				},
				{
					msg(trace.KindRecv, 1, 0, "allreduce", "world", 3, 1, 10),
					msg(trace.KindRecv, 1, 0, "allreduce", "world", 4, 0, 10),
					msg(trace.KindRecv, 1, 0, "allreduce", "comm-1", 3, 0, 10),
					msg(trace.KindRecv, 1, 0, "broadcast", "world", 3, 0, 10),
					msg(trace.KindRecv, 1, 0, "allreduce", "world", 3, 0, 10),
				},
				{
					msg(trace.KindRecv, 2, 0, "allreduce", "world", 3, 0, 10),
				},
			},
			want: []Link{
				{ref(0, 0), ref(1, 4)}, {ref(0, 1), ref(1, 3)}, {ref(0, 2), ref(1, 2)},
				{ref(0, 3), ref(1, 1)}, {ref(0, 4), ref(1, 0)}, {ref(0, 5), ref(2, 0)},
			},
		},
		{
			name: "duplicates pair in start order",
			ranks: [][]trace.Event{
				// Three point-to-point messages with one key (seq -1), listed out of order.
				{send(0, 1, -1, -1, 300), send(0, 1, -1, -1, 100), send(0, 1, -1, -1, 200)},
				{recv(1, 0, -1, -1, 250), recv(1, 0, -1, -1, 150), recv(1, 0, -1, -1, 350)},
			},
			want: []Link{{ref(0, 0), ref(1, 2)}, {ref(0, 1), ref(1, 1)}, {ref(0, 2), ref(1, 0)}},
		},
		{
			name: "duplicates with equal starts keep rank order",
			ranks: [][]trace.Event{
				{send(0, 1, 5, 0, 100), send(0, 1, 5, 0, 100)},
				{recv(1, 0, 5, 0, 100), recv(1, 0, 5, 0, 100)},
			},
			want: []Link{{ref(0, 0), ref(1, 0)}, {ref(0, 1), ref(1, 1)}},
		},
		{
			name: "a killed rank's messages are left out",
			ranks: [][]trace.Event{
				{send(0, 1, 0, 0, 10), recv(0, 2, 0, 0, 10), send(0, 2, 0, 1, 20)},
				{recv(1, 0, 0, 0, 10), send(1, 2, 0, 0, 10), recv(1, 2, 0, 1, 30)},
				nil, // rank 2 left no events
			},
			want: []Link{{ref(0, 0), ref(1, 0)}},
		},
		{
			name: "more sends than receives: the earliest are paired",
			ranks: [][]trace.Event{
				{send(0, 1, 7, 0, 30), send(0, 1, 7, 0, 10), send(0, 1, 7, 0, 20)},
				{recv(1, 0, 7, 0, 40)},
			},
			want: []Link{{ref(0, 1), ref(1, 0)}},
		},
		{
			name: "more receives than sends",
			ranks: [][]trace.Event{
				{send(0, 1, 7, 0, 10)},
				{recv(1, 0, 7, 0, 40), recv(1, 0, 7, 0, 15)},
			},
			want: []Link{{ref(0, 0), ref(1, 1)}},
		},
		{
			name: "a receive from a rank that is not in the run",
			ranks: [][]trace.Event{
				{recv(0, 9, 0, 0, 10), send(0, 9, 0, 0, 10), send(0, -1, 0, 0, 10)},
			},
			want: nil,
		},
		{
			name: "a send to itself",
			ranks: [][]trace.Event{
				{recv(0, 0, 0, 0, 12), send(0, 0, 0, 0, 10)},
			},
			want: []Link{{ref(0, 1), ref(0, 0)}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := MatchMessages(tc.ranks)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got  %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestMatchMessagesRing checks a whole ring allreduce of shuffled events:
// every message is linked once, to the right peer and chunk.
func TestMatchMessagesRing(t *testing.T) {
	const n, colls = 5, 20
	ranks := make([][]trace.Event, n)
	for c := range colls {
		for step := range 2 * (n - 1) {
			for r := range int32(n) {
				next := (r + 1) % n
				start := int64(c*1000 + step*10)
				ranks[r] = append(ranks[r], send(r, next, int64(c), int32(step), start))
				ranks[next] = append(ranks[next], recv(next, r, int64(c), int32(step), start+1))
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, evs := range ranks {
		rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	}
	links := MatchMessages(ranks)
	if want := n * colls * 2 * (n - 1); len(links) != want {
		t.Fatalf("%d links, want %d", len(links), want)
	}
	seen := map[EventRef]bool{}
	for _, l := range links {
		s, r := ranks[l.Send.Rank][l.Send.Index], ranks[l.Recv.Rank][l.Recv.Index]
		if s.Kind != trace.KindSend || r.Kind != trace.KindRecv || s.Peer != l.Recv.Rank || r.Peer != l.Send.Rank ||
			s.Seq != r.Seq || s.Chunk != r.Chunk || r.Start != s.Start+1 {
			t.Fatalf("bad link %v: %+v -> %+v", l, s, r)
		}
		if seen[l.Send] || seen[l.Recv] {
			t.Fatalf("event linked twice in %v", l)
		}
		seen[l.Send], seen[l.Recv] = true, true
	}
	if !slices.IsSortedFunc(links, func(a, b Link) int {
		if a.Send.Rank != b.Send.Rank {
			return int(a.Send.Rank - b.Send.Rank)
		}
		return a.Send.Index - b.Send.Index
	}) {
		t.Error("links are not in the order of their sends")
	}
}

// BenchmarkMatchMessages matches the messages of 2,000 ring allreduces on
// 8 ranks, with each rank's events in recorded order and shuffled.
func BenchmarkMatchMessages(b *testing.B) {
	const n, colls = 8, 2000
	ranks := make([][]trace.Event, n)
	for c := range colls {
		for step := range 2 * (n - 1) {
			for r := range int32(n) {
				next := (r + 1) % n
				start := int64(c*1000 + step)
				ranks[r] = append(ranks[r], send(r, next, int64(c), int32(step), start))
				ranks[next] = append(ranks[next], recv(next, r, int64(c), int32(step), start))
			}
		}
	}
	msgs := n * colls * 2 * (n - 1)
	run := func(b *testing.B) {
		for b.Loop() {
			if got := MatchMessages(ranks); len(got) != msgs {
				b.Fatalf("%d links, want %d", len(got), msgs)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(msgs), "ns/message")
	}
	b.Run("recorded", run)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, evs := range ranks {
		rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	}
	b.Run("shuffled", run)
}
