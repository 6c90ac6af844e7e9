package export

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/commprof/commprof/trace"
)

// parquetRun writes a run of n ranks with events events each; cut names
// ranks whose stream is left without its end (a killed rank), and
// foreign ranks whose file is not a trace at all.
func parquetRun(t *testing.T, n, events int, cut, foreign map[int]bool) string {
	t.Helper()
	dir := t.TempDir()
	for r := range n {
		path := filepath.Join(dir, trace.RankFile(r))
		if foreign[r] {
			if err := os.WriteFile(path, []byte("rank,kind\n0,send\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var buf bytes.Buffer
		w, err := trace.NewWriter(&buf, trace.RankInfo{Rank: r, WorldSize: n}, trace.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for b := range 3 {
			var evs []trace.Event
			for i := range events / 3 {
				evs = append(evs, trace.Event{Rank: int32(r), Kind: trace.KindSend, Name: "allreduce", Start: int64(b*events + i), Dur: 5,
					Bytes: 64, Peer: int32((r + 1) % n), Seq: int64(i), Step: -1, Root: -1, Chunk: -1, Comm: "world"})
			}
			if err := w.Write(evs); err != nil {
				t.Fatal(err)
			}
		}
		if !cut[r] {
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// parquetFiles lists the files under dir whose name ends in .parquet.
func parquetFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// TestParquetDamagedRun: a cut stream is exported up to its cut and a
// stream that is not a trace is left out, each with a warning naming
// its file; the other ranks are exported whole.
func TestParquetDamagedRun(t *testing.T) {
	run := parquetRun(t, 4, 30, map[int]bool{1: true}, map[int]bool{2: true})
	rf, err := trace.OpenRun(run)
	if err != nil {
		t.Fatal(err)
	}
	var warnings []string
	out := filepath.Join(t.TempDir(), "pq")
	res, err := Parquet(context.Background(), rf, out, ParquetOptions{Warn: func(err error) { warnings = append(warnings, err.Error()) }})
	if err != nil {
		t.Fatal(err)
	}
	// Rank 1's last batch was flushed but the stream has no end: all
	// three batches are complete and read.
	if res.Files != 3 || res.Rows != 90 {
		t.Errorf("%d files, %d rows; want 3 files (ranks 0, 1, 3), 90 rows", res.Files, res.Rows)
	}
	files := parquetFiles(t, out)
	if strings.Join(files, " ") != "rank=0/part-0.parquet rank=1/part-0.parquet rank=3/part-0.parquet" {
		t.Errorf("files %v", files)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 3 {
		t.Errorf("%d entries in the export, want the 3 partitions: %v", len(ents), ents)
	}
	joined := strings.Join(warnings, "\n")
	if len(warnings) != 2 || !strings.Contains(joined, trace.RankFile(1)) || !strings.Contains(joined, "cut") ||
		!strings.Contains(joined, trace.RankFile(2)) || !strings.Contains(joined, "no file for rank 2") {
		t.Errorf("warnings:\n%s", joined)
	}
}

// TestParquetInterrupted: an export stopped by its context (Ctrl-C)
// fails with the context's error and leaves no .parquet file, complete or
// temporary, behind.
func TestParquetInterrupted(t *testing.T) {
	rf, err := trace.OpenRun(parquetRun(t, 3, 300, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "pq")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Parquet(ctx, rf, out, ParquetOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled export: %v", err)
	}
	var left []string
	_ = filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	if len(left) > 0 {
		t.Errorf("left %v", left)
	}
}
