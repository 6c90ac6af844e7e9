package trace

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow/memory"
)

// realistic returns events shaped like a recorded 4-rank ring allreduce
// run: a collective, then its sends and recvs, with times that advance
// like a real rank's.
func realistic(n int) []Event {
	evs := make([]Event, 0, n)
	t := int64(0)
	for seq := int64(0); len(evs) < n; seq++ {
		evs = append(evs, Event{Kind: KindCollective, Name: "allreduce", Start: t, Dur: 1_800_000 + seq%977, Bytes: 4 << 20,
			Peer: -1, Seq: seq, Step: int32(seq / 8), Algo: "ring", DType: "float32", Root: -1, Chunk: -1, Comm: "world"})
		for c := int32(0); c < 6 && len(evs) < n; c++ {
			t += 150_000 + (seq*31+int64(c)*7)%5000
			evs = append(evs, Event{Kind: KindSend, Name: "allreduce", Start: t, Dur: 90_000 + int64(c)*13, Bytes: 1 << 20,
				Peer: 1, Seq: seq, Step: int32(seq / 8), Algo: "ring", DType: "float32", Root: -1, Chunk: c, Comm: "world"})
			evs = append(evs, Event{Kind: KindRecv, Name: "allreduce", Start: t + 11, Dur: 140_000 + int64(c)*17, Bytes: 1 << 20,
				Peer: 3, Seq: seq, Step: int32(seq / 8), Algo: "ring", DType: "float32", Root: -1, Chunk: c, Comm: "world", Wait: 20_000 + seq%1000})
		}
		t += 200_000
	}
	return evs[:n]
}

// batch is the recorder's buffer size: the events of one record batch.
const batch = 16384

// encode writes evs as one stream in batches of the recorder's size.
func encode(b *testing.B, evs []Event, codec Codec, info RankInfo) []byte {
	var out bytes.Buffer
	w, err := NewWriter(&out, info, WriterOptions{Codec: codec})
	if err != nil {
		b.Fatal(err)
	}
	for j := 0; j < len(evs); j += batch {
		if err := w.Write(evs[j:min(j+batch, len(evs))]); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return out.Bytes()
}

// BenchmarkWrite encodes batches of events as the recorder hands them over
// and reports the bytes each event takes on disk.
func BenchmarkWrite(b *testing.B) {
	for _, codec := range []Codec{Zstd, LZ4, None} {
		b.Run(string(codec), func(b *testing.B) {
			evs := realistic(1 << 16)
			var out bytes.Buffer
			b.ResetTimer()
			written := 0
			for i := 0; i < b.N; i++ {
				out.Reset()
				w, _ := NewWriter(&out, RankInfo{WorldSize: 1}, WriterOptions{Codec: codec})
				for j := 0; j < len(evs); j += batch {
					if err := w.Write(evs[j : j+batch]); err != nil {
						b.Fatal(err)
					}
				}
				_ = w.Close()
				written += len(evs)
			}
			b.ReportMetric(float64(out.Len())/float64(len(evs)), "B/event")
			b.ReportMetric(float64(written)/b.Elapsed().Seconds()/1e6, "Mevents/s")
		})
	}
}

// BenchmarkRead decodes one rank's stream.
func BenchmarkRead(b *testing.B) {
	for _, codec := range []Codec{Zstd, LZ4, None} {
		b.Run(string(codec), func(b *testing.B) {
			data := encode(b, realistic(1<<16), codec, RankInfo{WorldSize: 1})
			b.ResetTimer()
			start := time.Now()
			read := 0
			dst := make([]Event, 0, 1<<16)
			for i := 0; i < b.N; i++ {
				r, err := NewReader(bytes.NewReader(data), ReaderOptions{Alloc: memory.DefaultAllocator})
				if err != nil {
					b.Fatal(err)
				}
				dst = dst[:0]
				for {
					dst, err = r.Next(dst)
					if err == io.EOF {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				r.Release()
				read += len(dst)
			}
			b.ReportMetric(float64(read)/time.Since(start).Seconds()/1e6, "Mevents/s")
		})
	}
}

// BenchmarkReadRun reads a 4-rank run directory (ranks in parallel) and
// moves its events onto the aligned clock, as the analyzer will.
func BenchmarkReadRun(b *testing.B) {
	for _, codec := range []Codec{Zstd, LZ4} {
		b.Run(string(codec), func(b *testing.B) {
			dir := b.TempDir()
			evs := realistic(1 << 18)
			for r := range 4 {
				if err := os.WriteFile(filepath.Join(dir, RankFile(r)), encode(b, evs, codec, RankInfo{Rank: r, WorldSize: 4}), 0o644); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			n := 0
			for range b.N {
				run, err := ReadRun(dir)
				if err != nil {
					b.Fatal(err)
				}
				n += run.NumEvents()
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds()/1e6, "Mevents/s")
		})
	}
}

// BenchmarkReadBatches decodes one stream into columns, without an Event
// per row.
func BenchmarkReadBatches(b *testing.B) {
	for _, codec := range []Codec{Zstd, LZ4, None} {
		b.Run(string(codec), func(b *testing.B) {
			data := encode(b, realistic(1<<18), codec, RankInfo{WorldSize: 1})
			b.ResetTimer()
			read := 0
			var bt Batch
			for range b.N {
				r, err := NewReader(bytes.NewReader(data), ReaderOptions{})
				if err != nil {
					b.Fatal(err)
				}
				for {
					if err := r.NextBatch(&bt); err == io.EOF {
						break
					} else if err != nil {
						b.Fatal(err)
					}
					read += bt.Len
				}
				r.Release()
			}
			b.ReportMetric(float64(read)/b.Elapsed().Seconds()/1e6, "Mevents/s")
		})
	}
}
