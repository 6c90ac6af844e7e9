package interpose

import (
	"io"
	"testing"

	"github.com/commprof/commprof/trace"
)

func discardRecorder(b *testing.B) *Recorder {
	w, err := trace.NewWriter(io.Discard, trace.RankInfo{Rank: 0, WorldSize: 1}, trace.WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return NewRecorder(w, 0, Monotonic(), RecorderOptions{})
}

// BenchmarkRecord is the hot path without clock reads: one append of a
// send event into the current buffer (the writer encodes in the background).
func BenchmarkRecord(b *testing.B) {
	rec := discardRecorder(b)
	e := trace.Event{Kind: trace.KindSend, Name: "allreduce", Bytes: 1 << 20, Peer: 1, Seq: 7, Step: 3,
		Algo: "ring", DType: "float32", Root: -1, Chunk: 2, Comm: "world"}
	b.ResetTimer()
	for i := range b.N {
		e.Start = int64(i)
		rec.Record(&e)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/event")
	if err := rec.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkClock is the clock read each event pays for (twice for a span).
func BenchmarkClock(b *testing.B) {
	rec := discardRecorder(b)
	var s int64
	for range b.N {
		s += rec.Now()
	}
	b.StopTimer()
	_ = rec.Close()
	if s == 42 {
		b.Log(s)
	}
}

// BenchmarkRecordParallel records from every core at once.
func BenchmarkRecordParallel(b *testing.B) {
	rec := discardRecorder(b)
	b.RunParallel(func(pb *testing.PB) {
		e := trace.Event{Kind: trace.KindRecv, Name: "allreduce", Peer: 1, Seq: 7, Root: -1, Comm: "world"}
		for pb.Next() {
			rec.Record(&e)
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/event")
	_ = rec.Close()
}
