package trace

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// smallBatches returns a stream as a recording of a training rank writes
// it: many short batches, times running on from batch to batch, each
// batch in start order but starting with a span that began before the
// last batch's end (a step still running at the flush); and the events
// as Compact with batches of 9·per events writes them: each batch merged
// in start order.
func smallBatches(n, per int) ([][]Event, []Event) {
	var batches [][]Event
	var all []Event
	for b := range n {
		evs := sample(2, per, b%3)
		for i := range evs {
			evs[i].Start += int64(b*per)*1000 + int64(i*7919%97)
			evs[i].Dur += int64(i*7919%4099) * 13
		}
		if b > 0 {
			evs[0].Start = all[len(all)-1].Start - 50
		}
		slices.SortStableFunc(evs, func(a, b Event) int { return cmp.Compare(a.Start, b.Start) })
		batches = append(batches, evs)
		all = append(all, evs...)
	}
	for i := 0; i < len(all); i += 9 * per {
		merged := all[i:min(i+9*per, len(all))]
		slices.SortStableFunc(merged, func(a, b Event) int { return cmp.Compare(a.Start, b.Start) })
	}
	return batches, all
}

func TestCompact(t *testing.T) {
	for _, codec := range []Codec{Zstd, LZ4, None} {
		t.Run(string(codec), func(t *testing.T) {
			batches, want := smallBatches(40, 120)
			path := filepath.Join(t.TempDir(), RankFile(2))
			if err := os.WriteFile(path, write(t, memory.NewGoAllocator(), codec, batches, true), 0o640); err != nil {
				t.Fatal(err)
			}
			// 1000 events a batch: nine of the 120-event batches each.
			res, err := Compact(path, CompactOptions{Codec: codec, Level: LevelSmallest, BatchEvents: 1000})
			if err != nil {
				t.Fatal(err)
			}
			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Replaced || res.Events != 4800 || res.BatchesBefore != 40 || res.BatchesAfter != 5 ||
				res.BytesAfter >= res.BytesBefore || res.BytesAfter != st.Size() {
				t.Fatalf("compacting 40 batches of 120 events: %+v, file %d bytes", res, st.Size())
			}
			if st.Mode().Perm() != 0o640 {
				t.Errorf("the compacted file's mode is %v, the stream's was 0640", st.Mode().Perm())
			}
			info, got, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("compacted stream reads back differently (%d events, want %d)", len(got), len(want))
			}
			if info != (RankInfo{Rank: 2, WorldSize: 4, Host: "node<1>", PID: 42, ClockOffsetNS: -17, RunID: "run-x"}) {
				t.Errorf("compacting changed the rank's facts: %+v", info)
			}
			noLeftovers(t, filepath.Dir(path))

			// Compacted again, the stream cannot get smaller: it is kept.
			before, _ := os.ReadFile(path)
			res, err = Compact(path, CompactOptions{Codec: codec, Level: LevelSmallest, BatchEvents: 1000})
			after, _ := os.ReadFile(path)
			if err != nil || res.Replaced || !bytes.Equal(before, after) {
				t.Fatalf("second compaction: %+v, %v; file changed: %v", res, err, !bytes.Equal(before, after))
			}
			noLeftovers(t, filepath.Dir(path))
		})
	}
}

// TestCompactKeepsBadStreams: a cut or foreign stream is an error and is
// left exactly as it was.
func TestCompactKeepsBadStreams(t *testing.T) {
	batches, _ := smallBatches(5, 50)
	full := write(t, memory.NewGoAllocator(), Zstd, batches, true)
	for name, data := range map[string][]byte{
		"cut":     full[:len(full)*2/3],
		"foreign": []byte("PAR1 this is not an Arrow stream at all"),
		"empty":   {},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), RankFile(0))
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Compact(path, CompactOptions{})
			if err == nil {
				t.Fatal("compacting a bad stream succeeded")
			}
			if name == "cut" && !errors.Is(err, ErrTruncated) {
				t.Errorf("cut stream: %v, want a truncation error", err)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(after, data) {
				t.Error("the stream changed")
			}
			noLeftovers(t, filepath.Dir(path))
		})
	}
	if _, err := Compact(filepath.Join(t.TempDir(), "missing.arrows"), CompactOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

// TestTinyBuffersStoredRaw: a buffer that compression would not shrink is
// stored as it is behind the length -1, one that it shrinks is compressed,
// and Arrow's own reader reads a stream of both.
func TestTinyBuffersStoredRaw(t *testing.T) {
	for _, codec := range []Codec{Zstd, LZ4} {
		e, err := newEncoder(io.Discard, codec, LevelFast)
		if err != nil {
			t.Fatal(err)
		}
		e.buffer([]byte("ring"))
		if got := int64(binary.LittleEndian.Uint64(e.body)); got != -1 || string(e.body[8:]) != "ring" {
			t.Errorf("%s: a 4-byte buffer is stored as %q behind length %d", codec, e.body[8:], got)
		}
		e.reset()
		e.buffer(make([]byte, 4096))
		if got := binary.LittleEndian.Uint64(e.body); got != 4096 || len(e.body) > 100 {
			t.Errorf("%s: 4096 zero bytes take %d bytes behind length %d", codec, len(e.body), got)
		}
		data := write(t, memory.NewGoAllocator(), codec, [][]Event{sample(2, 3, 0), sample(2, 500, 1)}, true)
		_, got, err := readAll(t, memory.NewGoAllocator(), data)
		if err != nil || len(got) != 503 {
			t.Fatalf("%s: %v, %d events", codec, err, len(got))
		}
		if n := arrowRows(t, data); n != 503 {
			t.Fatalf("%s: Arrow's reader sees %d rows, want 503", codec, n)
		}
	}
}

// arrowRows reads data with Arrow's own IPC reader.
func arrowRows(t *testing.T, data []byte) int {
	t.Helper()
	r, err := ipc.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	n := 0
	for r.Next() {
		n += int(r.Record().NumRows())
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

func noLeftovers(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("the directory holds %v, want the stream alone", names)
	}
}
