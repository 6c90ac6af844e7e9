package trace

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

var update = flag.Bool("update", false, "rewrite golden files")

// sample returns n events of every kind, with names that appear in later
// batches only, so dictionaries grow across batches.
func sample(rank int32, n int, batch int) []Event {
	evs := make([]Event, 0, n)
	for i := range n {
		e := Event{Rank: rank, Start: int64(i) * 1000, Dur: int64(i%7) * 10, Peer: -1, Seq: -1, Step: -1, Root: -1, Chunk: -1, Comm: "world"}
		switch i % 6 {
		case 0:
			e.Kind, e.Name, e.Bytes, e.Seq, e.Algo, e.DType = KindCollective, "allreduce", 1<<20, int64(i), "ring", "float32"
			e.Label = fmt.Sprintf("grads/layer%d", i%3)
		case 1:
			e.Kind, e.Name, e.Bytes, e.Peer, e.Seq, e.Chunk, e.Algo, e.DType = KindSend, "allreduce", 4096, (rank+1)%4, int64(i-1), int32(i%6), "ring", "float32"
		case 2:
			e.Kind, e.Name, e.Bytes, e.Peer, e.Seq, e.Chunk, e.Wait, e.Algo, e.DType = KindRecv, "allreduce", 4096, (rank+3)%4, int64(i-2), int32(i%6), 5, "ring", "float32"
		case 3:
			e.Kind, e.Name, e.Step = KindCompute, fmt.Sprintf("backward/layer%d", batch), int32(i/6)
		case 4:
			e.Kind, e.Name, e.Step = KindStep, "step", int32(i/6)
		case 5:
			e.Kind, e.Name, e.Value, e.Comm = KindMark, "test_accuracy", 0.5+float64(i)/1e6, "world/c1"
		}
		evs = append(evs, e)
	}
	return evs
}

func write(t testing.TB, mem memory.Allocator, codec Codec, batches [][]Event, closeIt bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	rank := 2
	if len(batches) > 0 && len(batches[0]) > 0 {
		rank = int(batches[0][0].Rank)
	}
	w, err := NewWriter(&buf, RankInfo{Rank: rank, WorldSize: 4, Host: "node<1>", PID: 42, ClockOffsetNS: -17, RunID: "run-x"}, WriterOptions{Codec: codec, Alloc: mem})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		if err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if closeIt {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func readAll(t testing.TB, mem memory.Allocator, data []byte) (RankInfo, []Event, error) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data), ReaderOptions{Alloc: mem, Limit: int64(len(data)) + 1<<20})
	if err != nil {
		return RankInfo{}, nil, err
	}
	defer r.Release()
	evs, err := r.ReadAll()
	return r.Info(), evs, err
}

func TestRoundTrip(t *testing.T) {
	for _, codec := range []Codec{Zstd, LZ4, None} {
		t.Run(string(codec), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			batches := [][]Event{sample(2, 100, 0), sample(2, 1, 1), sample(2, 250, 2)}
			data := write(t, mem, codec, batches, true)
			info, got, err := readAll(t, mem, data)
			if err != nil {
				t.Fatal(err)
			}
			want := append(append(append([]Event{}, batches[0]...), batches[1]...), batches[2]...)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("events differ: got %d events, want %d; first got %+v want %+v", len(got), len(want), got[0], want[0])
			}
			if info != (RankInfo{Rank: 2, WorldSize: 4, Host: "node<1>", PID: 42, ClockOffsetNS: -17, RunID: "run-x"}) {
				t.Fatalf("info %+v", info)
			}
		})
	}
}

// TestTruncated cuts a stream at every length: every cut must read back as
// the complete batches before it and an ErrTruncated, never a panic.
func TestTruncated(t *testing.T) {
	batches := [][]Event{sample(1, 10, 0), sample(1, 15, 1), sample(1, 20, 2)}
	// Uncompressed, so that cutting every byte is quick; the cut handling
	// does not depend on the codec (TestRoundTrip covers the codecs).
	full := write(t, memory.NewGoAllocator(), None, batches, true)
	open := write(t, memory.NewGoAllocator(), None, batches, false)
	if !bytes.Equal(full[:len(open)], open) {
		t.Fatal("closing changed the batches")
	}
	if _, evs, err := readAll(t, memory.NewGoAllocator(), open); !errors.Is(err, ErrTruncated) || len(evs) != 45 {
		t.Fatalf("stream without its end marker: %d events, %v; want 45 and ErrTruncated", len(evs), err)
	}
	lastCount := -1
	for n := 0; n < len(full); n++ {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		_, evs, err := readAll(t, mem, full[:n])
		mem.AssertSize(t, 0)
		switch {
		case errors.Is(err, ErrNotTrace):
			if len(evs) != 0 {
				t.Fatalf("cut at %d: not a trace, yet %d events", n, len(evs))
			}
		case errors.Is(err, ErrTruncated):
			if c := len(evs); c != 0 && c != 10 && c != 25 && c != 45 {
				t.Fatalf("cut at %d: %d events, not a whole number of batches", n, c)
			}
			if len(evs) < lastCount {
				t.Fatalf("cut at %d: fewer events (%d) than a shorter cut (%d)", n, len(evs), lastCount)
			}
			lastCount = len(evs)
		default:
			t.Fatalf("cut at %d of %d: error %v", n, len(full), err)
		}
	}
	if lastCount != 45 {
		t.Fatalf("the longest cut kept %d events", lastCount)
	}
}

func TestForeignInput(t *testing.T) {
	// An Arrow stream, but not ours.
	var other bytes.Buffer
	s := arrow.NewSchema([]arrow.Field{{Name: "rank", Type: arrow.PrimitiveTypes.Int64}}, nil)
	w := ipc.NewWriter(&other, ipc.WithSchema(s))
	b := array.NewInt64Builder(memory.DefaultAllocator)
	b.Append(1)
	col := b.NewArray()
	rec := array.NewRecord(s, []arrow.Array{col}, 1)
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	w.Close()
	rec.Release()
	col.Release()
	b.Release()
	// Ours, from a future version.
	var future bytes.Buffer
	md := arrow.NewMetadata([]string{MetaVersion, MetaRank, MetaWorldSize}, []string{"9", "0", "1"})
	fw := ipc.NewWriter(&future, ipc.WithSchema(arrow.NewSchema(fields, &md)))
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		data []byte
		want error
	}{
		"empty":         {nil, ErrTruncated}, // its rank died before writing anything: a cut stream, not a foreign one
		"json":          {[]byte(`{"traceEvents": []}`), ErrNotTrace},
		"other arrow":   {other.Bytes(), ErrNotTrace},
		"random":        {bytes.Repeat([]byte{0xff, 0xff, 0xff, 0xff, 0x10, 0, 0, 0}, 10), ErrNotTrace},
		"future format": {future.Bytes(), ErrVersion},
	} {
		_, _, err := readAll(t, memory.NewGoAllocator(), tc.data)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

// TestGolden reads a stream committed in testdata, so that a change that
// breaks reading existing traces fails here. -update rewrites it.
func TestGolden(t *testing.T) {
	path := filepath.Join("testdata", "golden", "rank-00002.arrows")
	evs := sample(2, 12, 0)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		data := write(t, memory.NewGoAllocator(), Zstd, [][]Event{evs[:5], evs[5:]}, true)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		js, _ := json.MarshalIndent(evs, "", " ")
		if err := os.WriteFile(path+".json", js, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	info, got, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(path + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var want []Event
	if err := json.Unmarshal(js, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) || info.Rank != 2 || info.Host != "node<1>" {
		t.Fatalf("golden stream reads back differently: %d events, info %+v", len(got), info)
	}
}

func TestRunDirectory(t *testing.T) {
	dir := t.TempDir()
	for r := range 3 {
		// Rank 1's stream is left without its end marker, as a killed rank's.
		var buf bytes.Buffer
		w, err := NewWriter(&buf, RankInfo{Rank: r, WorldSize: 4, ClockOffsetNS: int64(r) * 100}, WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(sample(int32(r), 30, 0)); err != nil {
			t.Fatal(err)
		}
		if r != 1 {
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, RankFile(r)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := &Manifest{FormatVersion: FormatVersion, RunID: "r", WorldSize: 4, Status: StatusComplete,
		Ranks: []RankEntry{{Rank: 0}, {Rank: 1, ClockOffsetNS: 1000}, {Rank: 2, ClockOffsetNS: 2000, ClockDrift: 1e-3, SyncedAtNS: 0}}}
	if err := WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	run, err := ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(run.Ranks) != 3 || run.NumEvents() != 90 || run.Manifest.RunID != "r" {
		t.Fatalf("run: %d ranks, %d events", len(run.Ranks), run.NumEvents())
	}
	if run.Ranks[1].Truncated == nil {
		t.Error("rank 1's stream has no end marker but was not reported as cut")
	}
	if len(run.Problems) != 2 { // rank 1 cut, rank 3 missing
		t.Errorf("problems: %v", run.Problems)
	}
	// Offsets from the manifest: rank 1 +1000; rank 2 +2000 and 1e-3 drift.
	if got := run.Ranks[1].Events[1].Start; got != 1000+1000 {
		t.Errorf("rank 1 event at 1000 aligned to %d, want 2000", got)
	}
	if got := run.Ranks[2].Events[2].Start; got != 2000+2000+2 {
		t.Errorf("rank 2 event at 2000 aligned to %d, want 4002", got)
	}
}

// FuzzReader feeds arbitrary bytes to the reader: it may refuse them, but
// must not panic, hang or exhaust memory.
func FuzzReader(f *testing.F) {
	f.Add(write(f, memory.NewGoAllocator(), Zstd, [][]Event{sample(0, 10, 0), sample(0, 5, 1)}, true))
	f.Add(write(f, memory.NewGoAllocator(), None, [][]Event{sample(0, 3, 0)}, false))
	f.Add(write(f, memory.NewGoAllocator(), LZ4, [][]Event{sample(0, 10, 0), sample(0, 5, 1)}, true))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _, _ = readAll(t, memory.NewGoAllocator(), data)
	})
}

// TestBatches reads a stream as columns and checks them against the events.
func TestBatches(t *testing.T) {
	batches := [][]Event{sample(1, 40, 0), sample(1, 25, 3)}
	data := write(t, memory.NewGoAllocator(), Zstd, batches, true)
	r, err := NewReader(bytes.NewReader(data), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	var b Batch
	for i, want := range batches {
		if err := r.NextBatch(&b); err != nil {
			t.Fatal(err)
		}
		if b.Len != len(want) {
			t.Fatalf("batch %d: %d rows, want %d", i, b.Len, len(want))
		}
		for j := range want {
			if got := b.Event(j); !reflect.DeepEqual(got, want[j]) {
				t.Fatalf("batch %d row %d: %+v, want %+v", i, j, got, want[j])
			}
		}
	}
	if err := r.NextBatch(&b); err != io.EOF {
		t.Fatalf("after the last batch: %v", err)
	}
}

// TestColumns reads only some columns: they match a full read, and the
// others are nil.
func TestColumns(t *testing.T) {
	batches := [][]Event{sample(1, 40, 0), sample(1, 25, 3)}
	for _, codec := range []Codec{Zstd, LZ4, None} {
		data := write(t, memory.NewGoAllocator(), codec, batches, true)
		r, err := NewReader(bytes.NewReader(data), ReaderOptions{Columns: []string{ColKind, ColStart, ColName, ColValue}})
		if err != nil {
			t.Fatal(err)
		}
		noKind, err := NewReader(bytes.NewReader(data), ReaderOptions{Columns: []string{ColStart}})
		if err != nil {
			t.Fatal(err)
		}
		var b, nb Batch
		for i, want := range batches {
			if err := r.NextBatch(&b); err != nil {
				t.Fatal(err)
			}
			if err := noKind.NextBatch(&nb); err != nil || nb.Kind != nil || nb.Name != nil || len(nb.Start) != len(want) {
				t.Fatalf("%s batch %d, start only: %v, kind %v, %d starts", codec, i, err, nb.Kind, len(nb.Start))
			}
			if b.Rank != nil || b.Dur != nil || b.Algo != nil || b.Comm != nil || b.Wait != nil || b.Len != len(want) {
				t.Fatalf("%s batch %d: columns not asked for were decoded, or %d rows", codec, i, b.Len)
			}
			for j, e := range want {
				if b.Kind[j] != e.Kind || b.Start[j] != e.Start || b.Names[b.Name[j]] != e.Name || b.Value[j] != e.Value {
					t.Fatalf("%s batch %d row %d: %v %d %q %v, want %+v", codec, i, j, b.Kind[j], b.Start[j], b.Names[b.Name[j]], b.Value[j], e)
				}
			}
		}
		r.Release()
		noKind.Release()
	}
	if _, err := NewReader(bytes.NewReader(nil), ReaderOptions{Columns: []string{"starts"}}); err == nil || !strings.Contains(err.Error(), `"starts"`) {
		t.Errorf("an unknown column: %v", err)
	}
}

// TestRepeatedBuffers: a batch whose compressed column equals the previous
// batch's reuses its values, and a column that changes is decoded afresh;
// clock alignment does not change what the reader keeps.
func TestRepeatedBuffers(t *testing.T) {
	mk := func(step int32) []Event {
		evs := sample(1, 50, 0)
		for i := range evs {
			evs[i].Step = step
		}
		return evs
	}
	// Batches 0 and 1 are identical, times included; batch 2 has another
	// step in every row.
	batches := [][]Event{mk(7), mk(7), mk(8)}
	dir := t.TempDir()
	data := write(t, memory.NewGoAllocator(), Zstd, batches, true)
	if err := os.WriteFile(filepath.Join(dir, RankFile(1)), data, 0o644); err != nil {
		t.Fatal(err)
	}
	rf, err := OpenRun(dir) // no manifest: the stream's own offset, -17
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	err = rf.ScanStream(0, nil, func(_ RankInfo, b *Batch) error {
		for j, e := range batches[i] {
			if b.Step[j] != e.Step || b.Start[j] != e.Start-17 {
				t.Fatalf("batch %d row %d: step %d start %d, want %d and %d", i, j, b.Step[j], b.Start[j], e.Step, e.Start-17)
			}
		}
		i++
		return nil
	})
	if err != nil || i != 3 {
		t.Fatalf("%d batches, %v", i, err)
	}
}

// TestArrowReadsOurStreams reads what the Writer wrote with Arrow Go's own
// IPC reader, which commprof's reader no longer uses for batches: the
// encoder must write streams any Arrow implementation reads, dictionary
// deltas included.
func TestArrowReadsOurStreams(t *testing.T) {
	batches := [][]Event{sample(1, 40, 0), sample(1, 25, 3), sample(1, 7, 5)}
	var want []Event
	for _, b := range batches {
		want = append(want, b...)
	}
	for _, codec := range []Codec{Zstd, LZ4, None} {
		data := write(t, memory.NewGoAllocator(), codec, batches, true)
		r, err := ipc.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", codec, err)
		}
		row := 0
		nb := 0
		for r.Next() {
			rec := r.Record()
			nb++
			col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
			str := func(name string, i int) string {
				d := col(name).(*array.Dictionary)
				return d.Dictionary().(*array.String).Value(d.GetValueIndex(i))
			}
			for i := range int(rec.NumRows()) {
				e := want[row]
				if got := col(ColStart).(*array.Int64).Value(i); got != e.Start {
					t.Fatalf("%s row %d: start %d, want %d", codec, row, got, e.Start)
				}
				if col(ColPeer).(*array.Int32).Value(i) != e.Peer || col(ColValue).(*array.Float64).Value(i) != e.Value || col(ColWait).(*array.Int64).Value(i) != e.Wait {
					t.Fatalf("%s row %d: peer, value or wait differ from %+v", codec, row, e)
				}
				if str(ColKind, i) != e.Kind.String() || str(ColName, i) != e.Name || str(ColAlgo, i) != e.Algo || str(ColComm, i) != e.Comm || str(ColLabel, i) != e.Label {
					t.Fatalf("%s row %d: %s %s %s %s, want %+v", codec, row, str(ColKind, i), str(ColName, i), str(ColAlgo, i), str(ColComm, i), e)
				}
				row++
			}
		}
		if err := r.Err(); err != nil || row != len(want) || nb != len(batches) {
			t.Fatalf("%s: Arrow read %d rows in %d batches, want %d in %d: %v", codec, row, nb, len(want), len(batches), err)
		}
		r.Release()
	}
}

// TestLZ4Frames decodes LZ4 frames as other writers make them: linked
// blocks (a block's matches reaching into the one before), stored blocks,
// skippable frames, checksums; and refuses cut ones.
func TestLZ4Frames(t *testing.T) {
	le := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	var f []byte
	f = append(f, le(0x184D2A53)...) // a skippable frame of 3 bytes
	f = append(f, le(3)...)
	f = append(f, 1, 2, 3)
	f = append(f, le(0x184D2204)...)
	f = append(f, 0x40|0x10|0x04, 0x40, 0) // linked blocks, block and content checksums
	f = append(f, le(0x80000000|16)...)    // a stored block
	f = append(f, "abcdefghijklmnop"...)
	f = append(f, le(0)...) // its checksum (not checked)
	block := []byte{0x0C, 16, 0, 0x50, 'V', 'W', 'X', 'Y', 'Z'}
	f = append(f, le(uint32(len(block)))...) // a match 16 bytes back, into the stored block
	f = append(f, block...)
	f = append(f, le(0)...)
	f = append(f, le(0)...) // end mark
	f = append(f, le(0)...) // content checksum
	want := "abcdefghijklmnop" + "abcdefghijklmnop" + "VWXYZ"
	got, err := lz4Frames(f, make([]byte, 0, len(want)))
	if err != nil || string(got) != want {
		t.Fatalf("%q, %v; want %q", got, err, want)
	}
	for n := range len(f) - 4 {
		if _, err := lz4Frames(f[:n], make([]byte, 0, len(want))); err == nil && n > 11 {
			t.Fatalf("a frame cut to %d bytes decoded", n)
		}
	}
	if _, err := lz4Frames(f, make([]byte, 0, len(want)-1)); err == nil {
		t.Fatal("a frame larger than its declared size decoded")
	}
}

// TestHugeRowCount: a batch whose row count (in the batch and in every
// field node) claims far more rows than its buffers hold is refused,
// whichever columns are read, instead of handing out a Batch whose Len
// overruns its columns.
func TestHugeRowCount(t *testing.T) {
	data := write(t, memory.NewGoAllocator(), None, [][]Event{sample(1, 10, 0)}, true)
	g := newMessageGuard(bytes.NewReader(data), 1<<20)
	for {
		start := g.n
		kind, meta, _, err := g.next()
		if err != nil {
			t.Fatal("no record batch found")
		}
		if kind != msgRecordBatch {
			continue
		}
		f := &fb{b: meta}
		rb := f.ref(f.field(f.ref(0), 2))
		at := func(p int) []byte { return data[int(start)+8+p:] }
		binary.LittleEndian.PutUint64(at(f.field(rb, 0)), 1<<62)
		nodes, n := f.vector(rb, 1, 16)
		for i := range n {
			binary.LittleEndian.PutUint64(at(nodes+16*i), 1<<62)
		}
		break
	}
	for _, cols := range [][]string{nil, {ColStart}, {ColRank, ColValue}} {
		r, err := NewReader(bytes.NewReader(data), ReaderOptions{Columns: cols})
		if err != nil {
			t.Fatal(err)
		}
		var b Batch
		if err := r.NextBatch(&b); err == nil || !errors.Is(err, ErrTruncated) {
			t.Errorf("columns %v: a batch of 2^62 rows read as %d rows, error %v", cols, b.Len, err)
		}
	}
}

// TestCorruptIsNotCut: a damaged batch is reported as corruption, after
// the batches before it, not as a rank that stopped.
func TestCorruptIsNotCut(t *testing.T) {
	data := write(t, memory.NewGoAllocator(), Zstd, [][]Event{sample(1, 40, 0), sample(1, 40, 1)}, true)
	data[len(data)-20] ^= 0xFF // inside the last batch's last buffer
	_, evs, err := readAll(t, memory.NewGoAllocator(), data)
	if !errors.Is(err, ErrTruncated) || len(evs) != 40 || !strings.Contains(err.Error(), "corrupt") || strings.Contains(err.Error(), "stopped") {
		t.Fatalf("%d events, %v", len(evs), err)
	}
	_, evs, err = readAll(t, memory.NewGoAllocator(), data[:len(data)-30])
	if !errors.Is(err, ErrTruncated) || len(evs) != 40 || !strings.Contains(err.Error(), "stopped without closing") {
		t.Fatalf("cut: %d events, %v", len(evs), err)
	}
}

// TestStreamWithoutLabel reads streams written before the label column
// existed, and by writers that do not write it (the C writer of the PMPI
// library): every row's label is "", whichever columns are asked for.
func TestStreamWithoutLabel(t *testing.T) {
	// The golden stream predates the label column.
	golden := filepath.Join("testdata", "golden", "rank-00002.arrows")
	data, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	ar, err := ipc.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	hasLabel := len(ar.Schema().FieldIndices(ColLabel)) > 0
	ar.Release()
	if hasLabel {
		t.Fatal("the golden stream has a label column; this test needs a stream without one")
	}
	// A stream of the required columns only, written by Arrow Go's own
	// writer, as another implementation would.
	mem := memory.NewGoAllocator()
	md := arrow.NewMetadata([]string{MetaVersion, MetaRank, MetaWorldSize, MetaPID}, []string{"1", "0", "2", "7"})
	old := arrow.NewSchema(fields[:numRequired], &md)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(old), ipc.WithAllocator(mem))
	rb := array.NewRecordBuilder(mem, old)
	for i := range 3 {
		for c, f := range old.Fields() {
			switch bld := rb.Field(c).(type) {
			case *array.Int32Builder:
				switch f.Name {
				case ColRank:
					bld.Append(0) // the stream's rank
				case ColPeer:
					bld.Append(int32(i%2) - 1) // -1 or 0: ranks of a world of 2
				default:
					bld.Append(int32(i))
				}
			case *array.Int64Builder:
				bld.Append(int64(1000 * i))
			case *array.Float64Builder:
				bld.Append(0)
			case *array.BinaryDictionaryBuilder:
				v := ""
				switch f.Name {
				case ColKind:
					v = "collective"
				case ColName:
					v = "allreduce"
				case ColComm:
					v = "world"
				}
				if err := bld.AppendString(v); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("column %s: builder %T", f.Name, bld)
			}
		}
	}
	rec := rb.NewRecord()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	rb.Release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for name, stream := range map[string][]byte{"golden": data, "arrow": buf.Bytes()} {
		_, evs, err := readAll(t, memory.NewGoAllocator(), stream)
		if err != nil || len(evs) == 0 {
			t.Fatalf("%s: %d events, %v", name, len(evs), err)
		}
		for i, e := range evs {
			if e.Label != "" {
				t.Fatalf("%s: event %d has label %q", name, i, e.Label)
			}
		}
		for _, cols := range [][]string{{ColLabel}, {ColStart, ColLabel}, {ColStart}} {
			r, err := NewReader(bytes.NewReader(stream), ReaderOptions{Columns: cols})
			if err != nil {
				t.Fatal(err)
			}
			var b Batch
			rows := 0
			for {
				err := r.NextBatch(&b)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%s %v: %v", name, cols, err)
				}
				asked := len(cols) > 1 || cols[0] == ColLabel
				if !asked {
					if b.Label != nil {
						t.Fatalf("%s %v: label decoded though not asked for", name, cols)
					}
					continue
				}
				if len(b.Label) != b.Len || len(b.Labels) != 1 || b.Labels[0] != "" {
					t.Fatalf("%s %v: %d labels for %d rows, dictionary %q", name, cols, len(b.Label), b.Len, b.Labels)
				}
				for _, l := range b.Label {
					if l != 0 {
						t.Fatalf("%s %v: label index %d", name, cols, l)
					}
				}
				rows += b.Len
			}
			r.Release()
			if rows != len(evs) && (len(cols) > 1 || cols[0] == ColLabel) {
				t.Fatalf("%s %v: %d rows, want %d", name, cols, rows, len(evs))
			}
		}
	}
}

// TestLabels: labels round-trip, only grow their dictionary, and are read
// alone when asked for.
func TestLabels(t *testing.T) {
	batches := [][]Event{sample(1, 30, 0), sample(1, 30, 1)}
	batches[1][0].Label = "a label only the second batch has"
	data := write(t, memory.NewGoAllocator(), Zstd, batches, true)
	r, err := NewReader(bytes.NewReader(data), ReaderOptions{Columns: []string{ColLabel}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	var b Batch
	for i, want := range batches {
		if err := r.NextBatch(&b); err != nil {
			t.Fatal(err)
		}
		if b.Name != nil || b.Start != nil {
			t.Fatalf("batch %d: columns not asked for were decoded", i)
		}
		for j, e := range want {
			if got := b.Labels[b.Label[j]]; got != e.Label {
				t.Fatalf("batch %d row %d: label %q, want %q", i, j, got, e.Label)
			}
		}
	}
}

// arrowStream writes a stream of n rows with Arrow Go's own IPC writer, as
// another implementation (or a damaged file) would: every column's value
// in row i is val(column, i).
func arrowStream(t *testing.T, rank, world, n int, val func(col string, i int) any) []byte {
	t.Helper()
	mem := memory.NewGoAllocator()
	md := arrow.NewMetadata([]string{MetaVersion, MetaRank, MetaWorldSize, MetaPID}, []string{"1", strconv.Itoa(rank), strconv.Itoa(world), "7"})
	sc := arrow.NewSchema(fields[:numRequired], &md)
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(sc), ipc.WithAllocator(mem))
	rb := array.NewRecordBuilder(mem, sc)
	for i := range n {
		for c, f := range sc.Fields() {
			v := val(f.Name, i)
			switch bld := rb.Field(c).(type) {
			case *array.Int32Builder:
				bld.Append(v.(int32))
			case *array.Int64Builder:
				bld.Append(v.(int64))
			case *array.Float64Builder:
				bld.Append(v.(float64))
			case *array.BinaryDictionaryBuilder:
				if err := bld.AppendString(v.(string)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	rec := rb.NewRecord()
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	rb.Release()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReaderValidatesValues: values a run cannot hold (a peer beyond the
// world, a row of another rank, a negative duration, a huge world) are a
// corrupt stream naming the column, not numbers for an analysis to size
// tables by.
func TestReaderValidatesValues(t *testing.T) {
	good := func(col string, i int) any {
		switch col {
		case ColRank:
			return int32(0)
		case ColPeer, ColRoot, ColChunk, ColStep:
			return int32(-1)
		case ColKind:
			return "send"
		case ColName:
			return "allreduce"
		case ColComm:
			return "world"
		case ColAlgo, ColDType:
			return ""
		case ColValue:
			return 0.0
		}
		return int64(i)
	}
	for _, tc := range []struct {
		name, col string
		bad       any
		want      string
	}{
		{"peer beyond the world", ColPeer, int32(1_000_000_000), "column peer"},
		{"another rank's row", ColRank, int32(1), "column rank"},
		{"negative duration", ColDur, int64(-5), "column dur_ns"},
		{"negative bytes", ColBytes, int64(-1), "column bytes"},
		{"time out of range", ColStart, int64(math.MaxInt64), "column start_ns"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := arrowStream(t, 0, 2, 4, func(col string, i int) any {
				if col == tc.col && i == 2 {
					return tc.bad
				}
				return good(col, i)
			})
			_, evs, err := readAll(t, memory.NewGoAllocator(), data)
			if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), tc.want) || len(evs) != 0 {
				t.Fatalf("%d events, %v; want a corrupt stream naming %s", len(evs), err, tc.want)
			}
		})
	}
	if _, _, err := readAll(t, memory.NewGoAllocator(), arrowStream(t, 0, MaxWorldSize+1, 1, good)); !errors.Is(err, ErrNotTrace) {
		t.Errorf("a world of %d ranks: %v", MaxWorldSize+1, err)
	}
	w, err := NewWriter(io.Discard, RankInfo{Rank: 0, WorldSize: 2}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, e := range []Event{{Rank: 1, Peer: -1}, {Rank: 0, Peer: 2}} {
		if err := w.Write([]Event{e}); err == nil {
			t.Errorf("the writer took %+v into rank 0's stream of a world of 2", e)
		}
	}
}

// TestOpenRunDamage: a run directory damaged the ways a careless user or a
// dying rank leaves one still reads, with each damage named.
func TestOpenRunDamage(t *testing.T) {
	good := write(t, memory.NewGoAllocator(), Zstd, [][]Event{sample(0, 10, 0)}, true)
	mk := func(t *testing.T, files map[string][]byte, m *Manifest) string {
		dir := t.TempDir()
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if m != nil {
			if err := WriteManifest(dir, m); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	man := func(world int) *Manifest { return &Manifest{FormatVersion: FormatVersion, WorldSize: world} }

	t.Run("two files for one rank", func(t *testing.T) {
		dir := mk(t, map[string][]byte{RankFile(0): good, "rank-000000.arrows": good}, man(1))
		run, err := ReadRun(dir)
		if err != nil || len(run.Ranks) != 1 || len(run.Ranks[0].Events) != 10 || !strings.Contains(fmt.Sprint(run.Problems), "second stream of rank 0") {
			t.Fatalf("%v %+v", err, run)
		}
	})
	t.Run("an empty stream beside a good one", func(t *testing.T) {
		other := write(t, memory.NewGoAllocator(), Zstd, [][]Event{sample(1, 5, 0)}, true)
		dir := mk(t, map[string][]byte{RankFile(0): {}, RankFile(1): other}, man(4))
		run, err := ReadRun(dir)
		if err != nil || len(run.Ranks) != 2 || len(run.Ranks[1].Events) != 5 || run.Ranks[0].Truncated == nil {
			t.Fatalf("%v %+v", err, run)
		}
		if p := fmt.Sprint(run.Problems); !strings.Contains(p, "before its schema") || !strings.Contains(p, "2 ranks (2-3) have no stream") {
			t.Fatalf("problems: %s", p)
		}
	})
	t.Run("a FIFO named like a stream", func(t *testing.T) {
		dir := mk(t, map[string][]byte{RankFile(0): good}, man(1))
		if err := syscallMkfifo(filepath.Join(dir, RankFile(1))); err != nil {
			t.Skip(err)
		}
		rf, err := OpenRun(dir)
		if err != nil || len(rf.Streams) != 1 || !strings.Contains(fmt.Sprint(rf.Problems), "not a regular file") {
			t.Fatalf("%v %+v", err, rf)
		}
	})
	t.Run("symbolic links to a stream and to run.json", func(t *testing.T) {
		src := mk(t, map[string][]byte{RankFile(0): good}, man(1))
		dir := t.TempDir()
		for _, n := range []string{RankFile(0), ManifestFile} {
			if err := os.Symlink(filepath.Join(src, n), filepath.Join(dir, n)); err != nil {
				t.Fatal(err)
			}
		}
		run, err := ReadRun(dir)
		if err != nil || run.Manifest == nil || len(run.Ranks) != 1 || len(run.Ranks[0].Events) != 10 || len(run.Problems) != 0 {
			t.Fatalf("%v %+v", err, run)
		}
	})
	t.Run("a FIFO put in a stream's place after the listing", func(t *testing.T) {
		dir := mk(t, map[string][]byte{RankFile(0): good, RankFile(1): write(t, memory.NewGoAllocator(), Zstd, [][]Event{sample(1, 5, 0)}, true)}, man(2))
		rf, err := OpenRun(dir)
		if err != nil || len(rf.Streams) != 2 {
			t.Fatalf("%v %+v", err, rf)
		}
		path := filepath.Join(dir, RankFile(1))
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		if err := syscallMkfifo(path); err != nil {
			t.Skip(err)
		}
		// Opening a FIFO for reading waits for a writer: the scan must
		// refuse it instead, and at once.
		done := make(chan error, 1)
		go func() {
			done <- rf.ScanStream(1, nil, func(RankInfo, *Batch) error { return nil })
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotTrace) || !strings.Contains(err.Error(), "not a regular file") || !strings.Contains(err.Error(), RankFile(1)) {
				t.Fatalf("scanning a FIFO: %v", err)
			}
		case <-time.After(time.Minute):
			// Unblock the open so that the goroutine ends.
			if w, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
				w.Close()
			}
			t.Fatal("scanning a FIFO blocked")
		}
		if _, _, err := ReadFile(path); !errors.Is(err, ErrNotTrace) {
			t.Fatalf("reading a FIFO: %v", err)
		}
	})
	t.Run("run.json a FIFO", func(t *testing.T) {
		dir := mk(t, map[string][]byte{RankFile(0): good}, nil)
		if err := syscallMkfifo(filepath.Join(dir, ManifestFile)); err != nil {
			t.Skip(err)
		}
		if _, err := ReadManifest(dir); !errors.Is(err, ErrNotTrace) || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("one stream not a trace", func(t *testing.T) {
		dir := mk(t, map[string][]byte{RankFile(0): good, RankFile(1): []byte(`{"traceEvents": []}`)}, man(2))
		run, err := ReadRun(dir)
		if err != nil || len(run.Ranks) != 1 || run.Ranks[0].Info.Rank != 0 {
			t.Fatalf("%v %+v", err, run)
		}
		if p := fmt.Sprint(run.Problems); !strings.Contains(p, RankFile(1)) || !strings.Contains(p, "ignored") {
			t.Fatalf("problems: %s", p)
		}
		dir = mk(t, map[string][]byte{RankFile(0): []byte(`{"traceEvents": [1]}`), RankFile(1): []byte(`{"traceEvents": []}`)}, man(2))
		if _, err := ReadRun(dir); !errors.Is(err, ErrNotTrace) {
			t.Fatalf("no stream a trace: %v", err)
		}
	})
	t.Run("clock corrections no clock needs", func(t *testing.T) {
		m := man(1)
		m.Ranks = []RankEntry{{Rank: 0, ClockOffsetNS: math.MaxInt64, ClockDrift: 1e300}}
		dir := mk(t, map[string][]byte{RankFile(0): good}, m)
		run, err := ReadRun(dir)
		if err != nil {
			t.Fatal(err)
		}
		if p := fmt.Sprint(run.Problems); !strings.Contains(p, "run.json: rank 0's clock_offset_ns 9223372036854775807") || !strings.Contains(p, "unaligned") {
			t.Fatalf("problems: %s", p)
		}
		want := sample(0, 10, 0)
		for i, e := range run.Ranks[0].Events {
			if e.Start != want[i].Start {
				t.Fatalf("event %d starts at %d, want %d as written", i, e.Start, want[i].Start)
			}
		}
	})
	t.Run("a huge world", func(t *testing.T) {
		dir := mk(t, map[string][]byte{RankFile(0): good}, man(100_000_000))
		if _, err := OpenRun(dir); !errors.Is(err, ErrNotTrace) || !strings.Contains(err.Error(), "world_size 100000000") {
			t.Fatalf("%v", err)
		}
		dir = mk(t, map[string][]byte{RankFile(0): good}, man(MaxWorldSize))
		rf, err := OpenRun(dir)
		if err != nil || len(rf.Problems) != 1 || !strings.Contains(rf.Problems[0].Error(), "1048575 ranks (1-1048575) have no stream") {
			t.Fatalf("%v %v", err, rf.Problems)
		}
	})
}

// TestNaNMetrics: a loss that went NaN and an infinite figure are kept
// through run.json (as null, read back as NaN), never fatal.
func TestNaNMetrics(t *testing.T) {
	dir := t.TempDir()
	m := &Manifest{FormatVersion: FormatVersion, WorldSize: 1, Metrics: Metrics{"loss": math.NaN(), "ratio": math.Inf(1), "acc": 0.5}}
	if err := WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, ManifestFile))
	if !strings.Contains(string(b), `"loss": null`) {
		t.Errorf("run.json: %s", b)
	}
	got, err := ReadManifest(dir)
	if err != nil || !math.IsNaN(got.Metrics["loss"]) || !math.IsNaN(got.Metrics["ratio"]) || got.Metrics["acc"] != 0.5 {
		t.Fatalf("%v %v", err, got.Metrics)
	}
	for _, n := range []Number{Number(math.NaN()), Number(math.Inf(-1)), 2.5} {
		b, err := json.Marshal(n)
		var back Number
		if err != nil || json.Unmarshal(b, &back) != nil || (float64(n) == 2.5) != (back == 2.5) {
			t.Errorf("%v: %s %v -> %v", n, b, err, back)
		}
	}
}

// BatchOf is Event's inverse: every event, labels and all, comes back as
// it went in, and each string column's dictionary holds each value once.
func TestBatchOf(t *testing.T) {
	evs := sample(3, 500, 0)
	for i := range evs {
		evs[i].Label = []string{"", "fc1.weight", "fc2.bias"}[i%3]
	}
	b := BatchOf(evs)
	if b.Len != len(evs) {
		t.Fatalf("%d rows, want %d", b.Len, len(evs))
	}
	for i, want := range evs {
		if got := b.Event(i); !reflect.DeepEqual(got, want) {
			t.Fatalf("row %d: %+v, want %+v", i, got, want)
		}
	}
	if len(b.Labels) != 3 {
		t.Errorf("labels dictionary %q, want 3 values", b.Labels)
	}
}

// ScanStreamWithin feeds exactly the batches that hold an event
// overlapping its window by the run's clock (the manifest moves the
// rank's clock here), the same batches ScanStream feeds, whether the
// batches' extents are given (the others then not decoded) or read.
func TestScanStreamWithin(t *testing.T) {
	dir := t.TempDir()
	var batches [][]Event
	for b := range 10 {
		evs := sample(0, 60, b)
		for i := range evs {
			evs[i].Start += int64(b) * 100_000
		}
		if b == 3 {
			evs[10].Dur = 450_000 // reaches into batch 7's time
		}
		batches = append(batches, evs)
	}
	if err := os.WriteFile(filepath.Join(dir, RankFile(0)), write(t, memory.NewGoAllocator(), Zstd, batches, true), 0o644); err != nil {
		t.Fatal(err)
	}
	m := &Manifest{FormatVersion: FormatVersion, RunID: "r", WorldSize: 4, Status: StatusComplete, Ranks: []RankEntry{{Rank: 0, ClockOffsetNS: 5000}}}
	if err := WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	rf, err := OpenRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	var all [][]Event
	var spans [][2]int64
	err = rf.ScanStream(0, nil, func(_ RankInfo, b *Batch) error {
		sp, _ := BatchSpan(b)
		spans = append(spans, sp)
		var evs []Event
		for i := range b.Len {
			evs = append(evs, b.Event(i))
		}
		all = append(all, evs)
		return nil
	})
	if err != nil || len(all) != 10 {
		t.Fatalf("%d batches, %v", len(all), err)
	}
	if spans[0][0] != 5000 {
		t.Fatalf("the first batch starts at %d by the run's clock, want 5000", spans[0][0])
	}
	for _, win := range [][2]int64{{0, 1}, {5000, 5001}, {250_000, 260_000}, {745_000, 746_000}, {0, 2_000_000}, {3_000_000, 4_000_000}} {
		var want [][]Event
		for _, evs := range all {
			if slices.ContainsFunc(evs, func(e Event) bool { return e.Start < win[1] && e.Start+e.Dur >= win[0] }) {
				want = append(want, evs)
			}
		}
		if win == [2]int64{745_000, 746_000} && len(want) != 2 {
			t.Fatalf("window %v: %d batches hold it, want 2 (batch 3's long event and batch 7)", win, len(want))
		}
		for _, known := range [][][2]int64{spans, nil} {
			var got [][]Event
			err := rf.ScanStreamWithin(0, nil, win[0], win[1], known, func(_ RankInfo, b *Batch) error {
				var evs []Event
				for i := range b.Len {
					evs = append(evs, b.Event(i))
				}
				got = append(got, evs)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("window %v, extents known %v: fed %d batches, want %d", win, known != nil, len(got), len(want))
			}
		}
	}
	// Extents given are believed: batches said to hold nothing are not
	// decoded, and one beyond those given is read for its times.
	none := make([][2]int64, 9)
	for i := range none {
		none[i] = [2]int64{math.MaxInt64, math.MinInt64}
	}
	n := 0
	err = rf.ScanStreamWithin(0, nil, 0, 2_000_000, none, func(_ RankInfo, b *Batch) error { n++; return nil })
	if err != nil || n != 1 {
		t.Fatalf("extents of 9 batches holding nothing: %d batches fed (%v), want the 10th", n, err)
	}
}
