package trace

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apache/arrow/go/v15/parquet"
	"github.com/apache/arrow/go/v15/parquet/file"
)

// parquetRun writes a run of three ranks: rank 0 in several batches whose
// dictionaries grow, rank 1 cut (its rank was killed), rank 2 the golden
// stream written before the label column existed; the manifest moves
// rank 1's clock.
func parquetRun(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for r := range 2 {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, RankInfo{Rank: r, WorldSize: 4, Host: "node" + strconv.Itoa(r), RunID: "run-p"}, WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for b := range 5 {
			if err := w.Write(sample(int32(r), 37+b, b)); err != nil {
				t.Fatal(err)
			}
		}
		if r == 0 {
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, RankFile(r)), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(filepath.Join("testdata", "golden", "rank-00002.arrows"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, RankFile(2)), golden, 0o644); err != nil {
		t.Fatal(err)
	}
	m := &Manifest{FormatVersion: FormatVersion, RunID: "run-p", WorldSize: 4, Status: StatusComplete,
		Ranks: []RankEntry{{Rank: 0}, {Rank: 1, ClockOffsetNS: 1000, ClockDrift: 1e-4, SyncedAtNS: 500}, {Rank: 2}}}
	if err := WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestParquetRoundTrip writes each stream of a run as Parquet and reads
// the files back with Arrow's Parquet column readers: every event of the run
// as ReadRun reads it (times aligned), column by column, in row groups
// no larger than asked.
func TestParquetRoundTrip(t *testing.T) {
	dir := parquetRun(t)
	run, err := ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	rf, err := OpenRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	const group = 50
	for i, s := range rf.Streams {
		t.Run(filepath.Base(s.Path), func(t *testing.T) {
			var buf bytes.Buffer
			rows, info, err := rf.WriteParquet(context.Background(), i, &buf, ParquetOptions{RowGroupRows: group})
			want := run.Ranks[i]
			if want.Truncated != nil {
				if !errors.Is(err, ErrTruncated) {
					t.Fatalf("a cut stream: %v, want ErrTruncated", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if info.Rank != s.Rank || rows != int64(len(want.Events)) || rows == 0 {
				t.Fatalf("rank %d, %d rows; want rank %d, %d rows", info.Rank, rows, s.Rank, len(want.Events))
			}
			got, groups, kv := readParquet(t, buf.Bytes())
			if len(got) != len(want.Events) {
				t.Fatalf("read back %d rows, want %d", len(got), len(want.Events))
			}
			if wantGroups := (len(got) + group - 1) / group; len(groups) != wantGroups {
				t.Errorf("%d row groups of %v rows, want %d of at most %d", len(groups), groups, wantGroups, group)
			}
			for _, n := range groups {
				if n > group {
					t.Errorf("a row group of %d rows, over the %d asked for", n, group)
				}
			}
			host := want.Info.Host
			for j, e := range want.Events {
				g := got[j]
				e.Rank = g.Rank // not a column: the partition's
				if g.Event != e || g.host != host || g.world != 4 || g.runID != "run-p" {
					t.Fatalf("row %d: %+v (%s, %d, %s)\nwant %+v (%s, 4, run-p)", j, g.Event, g.host, g.world, g.runID, e, host)
				}
			}
			for k, v := range map[string]string{MetaRank: strconv.Itoa(s.Rank), MetaWorldSize: "4", MetaRunID: "run-p", MetaHost: host,
				MetaVersion: strconv.Itoa(FormatVersion)} {
				if kv[k] != v {
					t.Errorf("metadata %s = %q, want %q", k, kv[k], v)
				}
			}
		})
	}
}

// parquetRow is a row read back from a Parquet file.
type parquetRow struct {
	Event
	host, runID string
	world       int32
}

// readParquet reads a whole file with Arrow's Parquet column readers:
// its rows, the rows of each row group and its key-value metadata.
func readParquet(t *testing.T, data []byte) ([]parquetRow, []int64, map[string]string) {
	t.Helper()
	pf, err := file.NewParquetReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	md := pf.MetaData()
	if rep := md.Schema.Root().RepetitionType(); rep != parquet.Repetitions.Required {
		t.Errorf("the schema's root is %s, want required as the format says", rep)
	}
	kv := map[string]string{}
	for _, k := range md.KeyValueMetadata().Keys() {
		kv[k] = *md.KeyValueMetadata().FindValue(k)
	}
	cols := ParquetColumns()
	if md.Schema.NumColumns() != len(cols) {
		t.Fatalf("%d columns, want %d", md.Schema.NumColumns(), len(cols))
	}
	var rows []parquetRow
	var groups []int64
	for g := range pf.NumRowGroups() {
		rg := pf.RowGroup(g)
		n := rg.NumRows()
		groups = append(groups, n)
		base := len(rows)
		rows = append(rows, make([]parquetRow, n)...)
		for c, name := range cols {
			if got := md.Schema.Column(c).Name(); got != name {
				t.Fatalf("column %d is %q, want %q", c, got, name)
			}
			cr, err := rg.Column(c)
			if err != nil {
				t.Fatal(err)
			}
			read := func(got int, err error) {
				if err != nil || int64(got) != n {
					t.Fatalf("column %s of row group %d: %d of %d values: %v", name, g, got, n, err)
				}
			}
			switch cr := cr.(type) {
			case *file.ByteArrayColumnChunkReader:
				v := make([]parquet.ByteArray, n)
				_, got, err := cr.ReadBatch(n, v, nil, nil)
				read(got, err)
				for i := range v {
					setParquetField(t, &rows[base+i], name, string(v[i]))
				}
			case *file.Int64ColumnChunkReader:
				v := make([]int64, n)
				_, got, err := cr.ReadBatch(n, v, nil, nil)
				read(got, err)
				for i := range v {
					setParquetField(t, &rows[base+i], name, v[i])
				}
			case *file.Int32ColumnChunkReader:
				v := make([]int32, n)
				_, got, err := cr.ReadBatch(n, v, nil, nil)
				read(got, err)
				for i := range v {
					setParquetField(t, &rows[base+i], name, v[i])
				}
			case *file.Float64ColumnChunkReader:
				v := make([]float64, n)
				_, got, err := cr.ReadBatch(n, v, nil, nil)
				read(got, err)
				for i := range v {
					setParquetField(t, &rows[base+i], name, v[i])
				}
			default:
				t.Fatalf("column %s is read by a %T", name, cr)
			}
		}
	}
	return rows, groups, kv
}

func setParquetField(t *testing.T, r *parquetRow, name string, v any) {
	switch v := v.(type) {
	case string:
		switch name {
		case ColKind:
			kind, err := ParseKind(v)
			if err != nil {
				t.Fatal(err)
			}
			r.Kind = kind
		case ColName:
			r.Name = v
		case ColAlgo:
			r.Algo = v
		case ColDType:
			r.DType = v
		case ColComm:
			r.Comm = v
		case ColLabel:
			r.Label = v
		case ColHost:
			r.host = v
		case ColRunID:
			r.runID = v
		}
	case int64:
		switch name {
		case ColStart:
			r.Start = v
		case ColDur:
			r.Dur = v
		case ColBytes:
			r.Bytes = v
		case ColSeq:
			r.Seq = v
		case ColWait:
			r.Wait = v
		}
	case int32:
		switch name {
		case ColPeer:
			r.Peer = v
		case ColStep:
			r.Step = v
		case ColRoot:
			r.Root = v
		case ColChunk:
			r.Chunk = v
		case ColWorldSize:
			r.world = v
		}
	case float64:
		r.Value = v
	}
}

// TestParquetStopsWhenCancelled: a cancelled export stops with the
// context's error.
func TestParquetStopsWhenCancelled(t *testing.T) {
	rf, err := OpenRun(parquetRun(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var buf bytes.Buffer
	if _, _, err := rf.WriteParquet(ctx, 0, &buf, ParquetOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// BenchmarkParquet measures the Parquet writer's speed and the file's
// size per event.
func BenchmarkParquet(b *testing.B) {
	dir := b.TempDir()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, RankInfo{Rank: 0, WorldSize: 4}, WriterOptions{})
	if err != nil {
		b.Fatal(err)
	}
	const n = 200_000
	for k := range 50 {
		if err := w.Write(sample(0, n/50, k)); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, RankFile(0)), buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	rf, err := OpenRun(dir)
	if err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	for b.Loop() {
		out.Reset()
		if _, _, err := rf.WriteParquet(context.Background(), 0, &out, ParquetOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/event")
	b.ReportMetric(float64(out.Len())/n, "B/event")
}
