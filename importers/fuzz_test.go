package importers

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/commprof/commprof/trace"
)

// fuzzImport feeds arbitrary bytes to one format's importer: it may refuse
// them, but must not panic or hang, must write a run that reads back, and
// must write no more events than the input can account for.
func fuzzImport(f *testing.F, format string, seeds ...string) {
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		in := filepath.Join(dir, "input")
		if err := os.WriteFile(in, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "run")
		res, err := Import(context.Background(), []string{in}, Options{Format: format, Out: out, Op: "allreduce"})
		if err != nil {
			if res != nil {
				t.Fatalf("an error with a result: %v", err)
			}
			if _, serr := os.Stat(out); !errors.Is(serr, os.ErrNotExist) {
				t.Fatalf("a failed import left %s (%v)", out, err)
			}
			return
		}
		// A Horovod tick can stand for several events (one per rank of a
		// call, and its negotiation), so allow a few per input byte; an
		// nccl-tests table expands up to maxTestEvents.
		bound := int64(4*len(data) + 16)
		if format == NCCLTests {
			bound += maxTestEvents
		}
		if res.Events > bound {
			t.Fatalf("%d events from %d bytes", res.Events, len(data))
		}
		run, err := trace.ReadRun(out)
		if err != nil {
			t.Fatalf("the run does not read back: %v", err)
		}
		if int64(run.NumEvents()) != res.Events || res.Manifest.WorldSize > maxRanks {
			t.Fatalf("%d events read, %d written, world %d", run.NumEvents(), res.Events, res.Manifest.WorldSize)
		}
	})
}

func FuzzHorovod(f *testing.F) {
	fuzzImport(f, Horovod, "testdata/horovod_timeline.json", "testdata/horovod_old.json")
}

func FuzzKineto(f *testing.F) {
	fuzzImport(f, Kineto, "testdata/kineto_old.json", "testdata/kineto_2ranks/rank0.pt.trace.json")
}

func FuzzNCCLLog(f *testing.F) {
	fuzzImport(f, NCCLLog, "testdata/nccl_debug.log", "testdata/nccl_debug_timestamps.log", "testdata/nccl_grouped.log")
}

func FuzzInspector(f *testing.F) {
	fuzzImport(f, NCCLInspector, "testdata/inspector_2procs/gpu-node-7-pid1001.log")
}

func FuzzNCCLTests(f *testing.F) {
	fuzzImport(f, NCCLTests, "testdata/nccl_tests_all_gather.txt", "testdata/nccl_tests_2ranks.txt", "testdata/nccl_tests_all_reduce_ring.txt")
}

// FuzzDetect: detection never panics, always names a format or says why
// not, and reads a gzipped file by its content: DetectFile (which undoes
// gzip) names the format Detect names for the decompressed bytes, and for
// any other file the format Detect names for the bytes themselves.
func FuzzDetect(f *testing.F) {
	for _, s := range []string{"testdata/horovod_old.json", "testdata/kineto_old.json", "testdata/nccl_debug.log", "testdata/nccl_tests_2ranks.txt",
		"testdata/inspector_2procs/gpu-node-7-pid1001.log"} {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		var gz bytes.Buffer
		w := gzip.NewWriter(&gz)
		w.Write(b)
		w.Close()
		f.Add(gz.Bytes())
		f.Add(gz.Bytes()[:gz.Len()/2]) // a gzip stream cut short
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		format, why := Detect(data)
		if format == "" && why == "" {
			t.Fatal("no format and no reason")
		}
		path := filepath.Join(t.TempDir(), "input")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := DetectFile(path)
		content := data
		if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
			zr, zerr := gzip.NewReader(bytes.NewReader(data))
			if zerr != nil {
				if err == nil {
					t.Fatalf("a gzip header gzip rejects (%v) detected as %q", zerr, got)
				}
				return
			}
			content, _ = io.ReadAll(io.LimitReader(zr, sniffBytes))
		}
		want, _ := Detect(content)
		if got != want || (err == nil) != (want != "") {
			t.Fatalf("DetectFile: %q (%v); Detect of the content: %q", got, err, want)
		}
	})
}
