package analyze

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMsgLogRoundTrip: messages and waits read back from their packed
// logs, held in memory or spilled, are those added, in the order added;
// a message is marked waited exactly when a wait of its key was added,
// whether the wait came just after it (as the PMPI library writes them),
// long after, or before it, and the waits of a key mark its first
// messages, as matching them in the order the messages came does.
func TestMsgLogRoundTrip(t *testing.T) {
	for _, spill := range []bool{false, true} {
		rng := rand.New(rand.NewPCG(7, 1))
		var sp *logSpill
		if spill {
			sp = &logSpill{budget: 1, open: tempSpill}
		}
		ml, wl := msgLog{log: byteLog{sp: sp}}, waitLog{log: byteLog{sp: sp}}
		var msgs []p2pRec
		var waits []waitRec
		var queued []waitRec // waits added after a few more messages
		var late []waitRec   // waits added after every message
		at := int64(-3_000_000_000)
		addWait := func(w waitRec) {
			wl.add(w)
			waits = append(waits, w)
			ml.wait(p2pWaitKey{w.comm, w.peer, w.seq, w.bytes, w.end})
		}
		how := 0
		for i := range 200_000 { // several chunks of each log
			at += rng.Int64N(1 << 36)
			m := p2pRec{send: rng.IntN(2) == 0, comm: rng.Int32N(4), peer: rng.Int32N(1<<20) - 1, tag: rng.Int64N(1<<40) - 1<<39,
				start: at, end: at + rng.Int64N(1<<40), wait: rng.Int64N(1 << 30), bytes: rng.Int64N(1 << 62)}
			if i%50 == 7 {
				// The key of the message before, but for its start (two
				// messages from one peer on one tag that one Waitall
				// completed), waited for as that one was.
				p := msgs[len(msgs)-1]
				m.comm, m.peer, m.tag, m.bytes, m.end = p.comm, p.peer, p.tag, p.bytes, p.end
			} else {
				how = rng.IntN(20)
			}
			w := waitRec{comm: m.comm, name: 9, peer: m.peer, seq: m.tag, bytes: m.bytes, start: m.end - rng.Int64N(1000), end: m.end}
			if how == 0 {
				addWait(w) // before its message
			}
			ml.add(m)
			msgs = append(msgs, m)
			switch {
			case how == 0:
			case how < 10:
				addWait(w) // at once
			case how < 13:
				queued = append(queued, w)
			case how < 14:
				late = append(late, w)
			} // else a blocking message, waited for by no wait
			if len(queued) > rng.IntN(16) {
				for _, w := range queued {
					addWait(w)
				}
				queued = queued[:0]
			}
		}
		for _, w := range append(queued, late...) {
			addWait(w)
		}
		ml.settle()

		// What each message's mark should be: the waits of a key mark
		// its first messages.
		left := map[p2pWaitKey]int{}
		for _, w := range waits {
			left[p2pWaitKey{w.comm, w.peer, w.seq, w.bytes, w.end}]++
		}
		want := slices.Clone(msgs)
		for i, m := range want {
			if k := (p2pWaitKey{m.comm, m.peer, m.tag, m.bytes, m.end}); left[k] > 0 {
				want[i].waited = true
				left[k]--
			}
		}
		var got []p2pRec
		for m := range ml.all() {
			got = append(got, m)
		}
		if !slices.Equal(got, want) {
			for i := range min(len(got), len(want)) {
				if got[i] != want[i] {
					t.Fatalf("spill %v: message %d reads %+v, want %+v", spill, i, got[i], want[i])
				}
			}
			t.Fatalf("spill %v: %d messages read, want %d", spill, len(got), len(want))
		}
		var gotW []waitRec
		for w := range wl.all() {
			gotW = append(gotW, w)
		}
		if !slices.Equal(gotW, waits) {
			t.Fatalf("spill %v: %d waits read back differ from the %d added", spill, len(gotW), len(waits))
		}
		if len(ml.marked) == 0 || len(ml.marked) >= len(msgs)/10 {
			t.Fatalf("spill %v: %d messages marked by waits that came apart from them: the cases are not tested", spill, len(ml.marked))
		}
		if spill && sp.size == 0 {
			t.Fatalf("nothing was spilled")
		}
		sp.close()
	}
}

// TestSpanUnionHoldsLateSpans: spans that come a few hundred places late
// (messages completed out of the order they were posted) merge in the
// spans held, without collecting every span; later than that, they are
// still merged as union merges them.
func TestSpanUnionHoldsLateSpans(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, tc := range []struct {
		late int  // how far a span may come after its place
		held bool // merged among the spans held
	}{{0, true}, {8, true}, {unionTail / 2, true}, {4 * unionTail, false}} {
		// Apart (each its own merged span, so that the held spans fill
		// up), some overlapping the next.
		var p []span
		for i := range 20_000 {
			lo := int64(i) * 10
			p = append(p, span{lo, lo + 5 + 6*int64(rng.IntN(8)/7)})
		}
		for i := 0; tc.late > 0 && i < len(p); i += tc.late {
			block := p[i:min(i+tc.late, len(p))]
			rng.Shuffle(len(block), func(a, b int) { block[a], block[b] = block[b], block[a] })
		}
		u := spanUnion{}
		for _, x := range p {
			u.add(x)
		}
		if (u.raw == nil) != tc.held {
			t.Errorf("spans up to %d late: %d collected to merge at the end", tc.late, len(u.raw))
		}
		if n := len(u.tail) - u.head; n > unionTail {
			t.Errorf("spans up to %d late: %d held", tc.late, n)
		}
		if got, want := unpack(u.seq()), union(slices.Clone(p)); !slices.Equal(got, want) {
			t.Fatalf("spans up to %d late: %d merged spans, union has %d", tc.late, len(got), len(want))
		}
	}
}
