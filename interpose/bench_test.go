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
// send event into the current buffer, in steady state (buffers already
// touched, as after a run's first seconds). The hand-over of a full buffer
// to the background writer, which waits while the writer is behind, is
// left out of the timing: the writer's cost is BenchmarkWrite in trace/.
func BenchmarkRecord(b *testing.B) {
	const per = 1 << 16
	e := trace.Event{Kind: trace.KindSend, Name: "allreduce", Bytes: 1 << 20, Peer: 1, Seq: 7, Step: 3,
		Algo: "ring", DType: "float32", Root: -1, Chunk: 2, Comm: "world"}
	w, err := trace.NewWriter(io.Discard, trace.RankInfo{WorldSize: 1}, trace.WriterOptions{Codec: trace.None})
	if err != nil {
		b.Fatal(err)
	}
	rec := NewRecorder(w, 0, Monotonic(), RecorderOptions{ChunkEvents: per, Chunks: 2})
	for range 3 * per { // touch both buffers
		rec.Record(&e)
	}
	b.ResetTimer()
	for i := range b.N {
		e.Start = int64(i)
		if i%per == per-1 {
			b.StopTimer()
			rec.Record(&e)
			b.StartTimer()
			continue
		}
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
