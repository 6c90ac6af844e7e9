package load

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/commprof/commprof/trace"
)

func TestPackRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	check := func(name string, vals []int64) {
		t.Helper()
		p := pack(vals)
		if got := unpack(p, len(vals), []int64(nil)); !slices.Equal(got, vals) {
			t.Errorf("%s: width %d, got %v, want %v", name, p.width, got[:min(8, len(got))], vals[:min(8, len(vals))])
		}
		// The scratch slice is reused when it is large enough.
		dst := make([]int64, 0, len(vals)+5)
		if got := unpack(p, len(vals), dst); &got[0] != &dst[:1][0] {
			t.Errorf("%s: unpack did not reuse its destination", name)
		}
	}
	check("constant", []int64{-1, -1, -1})
	check("one", []int64{42})
	check("extremes", []int64{math.MinInt64, math.MaxInt64, 0, -1, 1})
	for w := 1; w <= 8; w++ {
		// A span that needs w bytes: from 2^(8(w-1)) to 2^(8w)-1.
		least, most := uint64(1)<<(8*(w-1)), uint64(math.MaxUint64)>>(64-8*w)
		span := least + rng.Uint64N(most-least+1)
		lo := rng.Int64N(1 << 40)
		if w == 8 {
			lo = math.MinInt64
		}
		vals := []int64{lo, int64(uint64(lo) + span)}
		for range 1000 {
			vals = append(vals, int64(uint64(lo)+rng.Uint64N(span)))
		}
		if p := pack(vals); int(p.width) != w {
			t.Errorf("span %#x: width %d, want %d", span, p.width, w)
		}
		check("width", vals)
	}
	i32 := []int32{math.MinInt32, math.MaxInt32, -1, 0, 7}
	if got := unpack(pack(i32), len(i32), []int32(nil)); !slices.Equal(got, i32) {
		t.Errorf("int32: %v", got)
	}
	kinds := []trace.Kind{trace.KindSend, trace.KindRecv, trace.KindStep}
	if got := unpack(pack(kinds), len(kinds), []trace.Kind(nil)); !slices.Equal(got, kinds) {
		t.Errorf("kinds: %v", got)
	}
}

// keepAll keeps every kind but marks, with every column that can be kept.
func keepAll(budget int64) *Keep {
	return &Keep{Kinds: []trace.Kind{trace.KindStep, trace.KindCompute, trace.KindCollective, trace.KindSend, trace.KindRecv},
		Columns: keepableNames(), Budget: budget}
}

// collect gathers every event a Replay or an Events call feeds, by stream,
// as events holding the kept columns, of the kept kinds.
func collect(t *testing.T, k *Keep, feed func(sink func(stream, rank int) func(*trace.Batch)) error) [][]trace.Event {
	t.Helper()
	var out [][]trace.Event
	err := feed(func(stream, rank int) func(*trace.Batch) {
		if stream != len(out) {
			t.Fatalf("sink for stream %d after %d streams", stream, len(out))
		}
		out = append(out, nil)
		return func(b *trace.Batch) {
			for i := range b.Len {
				if !slices.Contains(k.Kinds, b.Kind[i]) {
					continue
				}
				out[stream] = append(out[stream], trace.Event{Rank: b.Rank[i], Kind: b.Kind[i], Name: b.Names[b.Name[i]], Start: b.Start[i],
					Dur: b.Dur[i], Bytes: b.Bytes[i], Peer: b.Peer[i], Seq: b.Seq[i], Step: b.Step[i], Algo: b.Algos[b.Algo[i]],
					DType: b.DTypes[b.DType[i]], Root: b.Root[i], Chunk: b.Chunk[i], Comm: b.Comms[b.Comm[i]], Wait: b.Wait[i]})
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// What Load keeps, Replay gives back exactly as a second read of the run
// gives it, clock corrections included; over its budget, Load keeps
// nothing and Replay reads the run again.
func TestReplayEqualsSecondRead(t *testing.T) {
	for _, cut := range []bool{false, true} {
		dir := t.TempDir()
		// 4 ranks of 18,000 events in batches of 1,000: the budget runs
		// out in the middle of a stream.
		writeSteps(t, dir, 1200, 1000)
		if cut {
			p := filepath.Join(dir, trace.RankFile(1))
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b[:len(b)/2], 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ctx := context.Background()
		k := keepAll(0)
		want := collect(t, k, func(sink func(int, int) func(*trace.Batch)) error { return Events(ctx, dir, nil, sink) })
		n := 0
		for _, evs := range want {
			n += len(evs)
		}
		run, err := Load(ctx, dir, k)
		if err != nil {
			t.Fatal(err)
		}
		events, bytes := run.Kept()
		if run.Reread() || events != int64(n) || bytes <= 0 || bytes > 40*events {
			t.Fatalf("cut %v: reread %v, kept %d events (want %d) in %d bytes", cut, run.Reread(), events, n, bytes)
		}
		t.Logf("cut %v: %d events kept in %d bytes, %.1f bytes each", cut, events, bytes, float64(bytes)/float64(events))
		got := collect(t, k, func(sink func(int, int) func(*trace.Batch)) error { return run.Replay(ctx, sink) })
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("cut %v: replayed events differ from a second read", cut)
		}
		if cut && len(run.Summary.Problems) == 0 {
			t.Fatal("the cut stream is not among the problems")
		}

		over, err := Load(ctx, dir, keepAll(bytes/10))
		if err != nil {
			t.Fatal(err)
		}
		if e, b := over.Kept(); !over.Reread() || e != 0 || b != 0 {
			t.Fatalf("over the budget: reread %v, kept %d events in %d bytes", over.Reread(), e, b)
		}
		if got := collect(t, k, func(sink func(int, int) func(*trace.Batch)) error { return over.Replay(ctx, sink) }); !reflect.DeepEqual(got, want) {
			t.Fatalf("cut %v: events read again differ from a second read", cut)
		}
	}
}

// A stream's stage holds its rows until the stream is read: finish packs
// them and gives the stage back, so that the next stream's keeper takes
// the same columns (a run of 512 streams held 512 stages to the end of
// its read: 388 MB).
func TestKeeperFinishGivesTheStageBack(t *testing.T) {
	var shared budget
	shared.max.Store(1 << 30)
	var want []int64
	for s := range 3 {
		k := newKeeper([]string{trace.ColKind, trace.ColStart}, []trace.Kind{trace.KindCompute}, &shared)
		for range 3 {
			b := &trace.Batch{Len: 5000}
			for i := range b.Len {
				b.Kind = append(b.Kind, trace.KindCompute)
				b.Start = append(b.Start, int64(s*1_000_000+len(want)+i))
			}
			want = append(want, b.Start...)
			k.add(b)
		}
		k.finish()
		for c, st := range k.stage {
			if st != nil {
				t.Fatalf("stream %d: column %d's stage kept after finish (%d rows, cap %d)", s, c, len(st), cap(st))
			}
		}
		var got []int64
		k.replay(context.Background(), func(b *trace.Batch) { got = append(got, b.Start[:b.Len]...) })
		if w := want[len(want)-15000:]; !slices.Equal(got, w) {
			t.Fatalf("stream %d: %d starts kept, want %d", s, len(got), len(w))
		}
	}
}

// A stream's dictionary that grows is one dictionary; one that is
// replaced starts a chunk of its own.
func TestKeepDictionaries(t *testing.T) {
	var shared budget
	shared.max.Store(1 << 30)
	k := newKeeper([]string{trace.ColKind, trace.ColName}, []trace.Kind{trace.KindCompute}, &shared)
	batch := func(names []string, idx ...int32) *trace.Batch {
		b := &trace.Batch{Len: len(idx), Name: idx, Names: names}
		for range idx {
			b.Kind = append(b.Kind, trace.KindCompute)
		}
		return b
	}
	k.add(batch([]string{"a", "b"}, 0, 1))
	k.add(batch([]string{"a", "b", "c"}, 2, 0))      // grows
	k.add(batch([]string{"x", "y"}, 1, 0))           // replaced
	k.add(batch([]string{"x", "y", "z", "w"}, 3, 2)) // grows again
	k.flush()
	if len(k.chunks) != 2 {
		t.Fatalf("%d chunks, want 2", len(k.chunks))
	}
	var got []string
	k.replay(context.Background(), func(b *trace.Batch) {
		for i := range b.Len {
			got = append(got, b.Names[b.Name[i]])
		}
	})
	if want := []string{"a", "b", "c", "a", "y", "x", "w", "z"}; !slices.Equal(got, want) {
		t.Fatalf("names %v, want %v", got, want)
	}
}

func TestKeepBadColumns(t *testing.T) {
	for _, k := range []*Keep{{Columns: []string{trace.ColValue}}, {Columns: []string{"colour"}}, {Budget: -1}} {
		if _, err := Load(context.Background(), t.TempDir(), k); err == nil {
			t.Errorf("Keep %+v accepted", k)
		}
	}
}

// BenchmarkLoad summarizes the 2.4 M-event run of BenchmarkSummary while
// keeping its events as a timeline does (keep), and then feeds them back
// (replay); B/event is what the kept events take.
func BenchmarkLoad(b *testing.B) {
	dir := b.TempDir()
	writeSteps(b, dir, 40_000, 16384)
	keep := &Keep{Kinds: []trace.Kind{trace.KindStep, trace.KindCompute, trace.KindCollective, trace.KindSend, trace.KindRecv},
		Columns: []string{trace.ColName, trace.ColStart, trace.ColDur, trace.ColBytes, trace.ColPeer, trace.ColSeq, trace.ColStep,
			trace.ColAlgo, trace.ColWait, trace.ColComm, trace.ColChunk}, Budget: 1 << 30}
	var run *Run
	b.Run("keep", func(b *testing.B) {
		var events int64
		for range b.N {
			var err error
			if run, err = Load(context.Background(), dir, keep); err != nil {
				b.Fatal(err)
			}
			events += run.Summary.Run.Events
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
		n, bytes := run.Kept()
		b.ReportMetric(float64(bytes)/float64(n), "B/event")
	})
	b.Run("replay", func(b *testing.B) {
		var events int64
		for range b.N {
			var counts [8]int64
			if err := run.Replay(context.Background(), func(i, _ int) func(*trace.Batch) {
				return func(bt *trace.Batch) { counts[i] += int64(bt.Len) }
			}); err != nil {
				b.Fatal(err)
			}
			for _, c := range counts {
				events += c
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
	})
}
