package analyze

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCallLogRoundTrip: a rank's calls read back from the packed log are
// the calls added, in (comm, seq) order, whether they came in that order
// (one communicator) or not (three interleaved, negative and huge values).
func TestCallLogRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, comms := range []int32{1, 3} {
		var l callLog
		var want []callRec
		seq := map[int32]int64{}
		at := int64(-5_000_000_000)
		for range 300_000 { // several chunks
			comm := rng.Int32N(comms)
			seq[comm]++
			at += rng.Int64N(1 << 40)
			c := callRec{comm: comm, name: rng.Int32N(1 << 20), algo: rng.Int32N(9), label: rng.Int32N(1 << 30), rank: 3,
				root: rng.Int32N(5) - 1, step: rng.Int32N(1<<31-1) - 1<<30, seq: seq[comm], start: at,
				dur: rng.Int64N(1 << 50), bytes: rng.Int64N(1 << 62), recvWait: rng.Int64N(1 << 30), nonBlocking: rng.IntN(3) == 0}
			l.add(c)
			want = append(want, c)
		}
		if len(l.runs) != int(comms) {
			t.Fatalf("%d comms: %d runs", comms, len(l.runs))
		}
		slices.SortStableFunc(want, cmpCall)
		r := l.reader(3, nil)
		for i, w := range want {
			if !r.ok || r.head != w {
				t.Fatalf("%d comms: call %d reads %+v (ok %v), want %+v", comms, i, r.head, r.ok, w)
			}
			r.next()
		}
		if r.ok {
			t.Fatalf("%d comms: more calls than added", comms)
		}
	}
}

// TestCallLogOutOfOrder: calls that come out of sequence order, a few
// (a call's event written late) or all of them (more runs than are kept:
// sorted when read), read back in (comm, seq) order, ties in the order
// added; a communicator out of order at every other call keeps at most
// callLogRuns runs.
func TestCallLogOutOfOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, swaps := range []int{3, 5000} {
		var l callLog
		var want []callRec
		n := 20000
		seqs := make([]int64, n)
		for i := range seqs {
			seqs[i] = int64(i / 2) // pairs of equal sequence numbers
		}
		for range swaps {
			i, j := rng.IntN(n), rng.IntN(n)
			seqs[i], seqs[j] = seqs[j], seqs[i]
		}
		for i, s := range seqs {
			c := callRec{comm: int32(i % 2), seq: s, start: int64(i), dur: int64(i), rank: 1}
			l.add(c)
			want = append(want, c)
		}
		if len(l.runs) > 2*callLogRuns {
			t.Fatalf("%d swaps: %d runs for 2 communicators", swaps, len(l.runs))
		}
		slices.SortStableFunc(want, cmpCall)
		r := l.reader(1, nil)
		for i, w := range want {
			if !r.ok || r.head.comm != w.comm || r.head.seq != w.seq || r.head.start != w.start {
				t.Fatalf("%d swaps: call %d reads %+v, want %+v", swaps, i, r.head, w)
			}
			r.next()
		}
		if r.ok {
			t.Fatalf("%d swaps: more calls than added", swaps)
		}
	}
}

// BenchmarkCallLogRead reads back 1 M packed calls of one communicator,
// what each round over a run's calls does for every rank.
func BenchmarkCallLogRead(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	var l callLog
	at := int64(0)
	for i := range int64(1 << 20) {
		at += 5000 + rng.Int64N(3000)
		l.add(callRec{comm: 1, name: 3, algo: 2, root: -1, step: int32(i / 100), seq: i, start: at, dur: 2000 + rng.Int64N(500), bytes: 8})
	}
	b.ResetTimer()
	for range b.N {
		n := 0
		for r := l.reader(0, nil); r.ok; r.next() {
			n++
		}
		if n != 1<<20 {
			b.Fatalf("%d calls read", n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N<<20), "ns/call")
}
