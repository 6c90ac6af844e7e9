package main

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/trace"
)

// TestExportRecordedRun records a small run and exports it in every
// format, reading each file back with a reader of that format.
func TestExportRecordedRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	r := commprof(t, nil, "record", "--ranks", "3", "--out", dir, "--", "bench", "allreduce", "--max", "256K", "--iters", "2", "--warmup", "1")
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[trace.Kind]int{}
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			kinds[e.Kind]++
		}
	}
	if kinds[trace.KindSend] == 0 || kinds[trace.KindSend] != kinds[trace.KindRecv] {
		t.Fatalf("recorded %v", kinds)
	}

	t.Run("perfetto", func(t *testing.T) {
		r := commprof(t, nil, "export", dir, "--format", "perfetto")
		file := filepath.Join(dir, "perfetto.json")
		if r.code != 0 || !strings.Contains(r.stdout, "exported "+dir) || !strings.Contains(r.stdout, "to "+file) ||
			!strings.Contains(r.stdout, "https://ui.perfetto.dev") {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var tf struct {
			TraceEvents []struct {
				Ph   string         `json:"ph"`
				Name string         `json:"name"`
				Pid  int            `json:"pid"`
				ID   int            `json:"id"`
				Args map[string]any `json:"args"`
			} `json:"traceEvents"`
		}
		if err := json.Unmarshal(b, &tf); err != nil {
			t.Fatal(err)
		}
		phases := map[string]int{}
		procs := map[int]string{}
		for _, e := range tf.TraceEvents {
			phases[e.Ph]++
			if e.Ph == "M" && e.Name == "process_name" {
				procs[e.Pid], _ = e.Args["name"].(string)
			}
		}
		if phases["X"] != run.NumEvents()-kinds[trace.KindMark]-kinds[trace.KindSample] || phases["s"] != kinds[trace.KindSend] || phases["f"] != phases["s"] ||
			phases["C"] != kinds[trace.KindSample] || kinds[trace.KindSample] == 0 {
			t.Errorf("phases %v for events %v: want an X per span, a flow per message and a counter per sample", phases, kinds)
		}
		if len(procs) != 3 || !strings.HasPrefix(procs[1], "rank 0 (") || !strings.HasPrefix(procs[3], "rank 2 (") {
			t.Errorf("processes %v", procs)
		}
	})

	t.Run("pprof", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "comm.pb.gz")
		r := commprof(t, nil, "export", dir, "--format", "pprof", "-o", file)
		if r.code != 0 || !strings.Contains(r.stdout, "go tool pprof -http=: "+file) {
			t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		p, err := profile.Parse(f)
		if err != nil {
			t.Fatal(err)
		}
		var msgs int64
		for _, s := range p.Sample {
			msgs += s.Value[2]
		}
		if msgs != int64(kinds[trace.KindSend]+kinds[trace.KindRecv]) {
			t.Errorf("profile counts %d messages, the run has %d sends and %d receives", msgs, kinds[trace.KindSend], kinds[trace.KindRecv])
		}
	})

	t.Run("csv to stdout", func(t *testing.T) {
		r := commprof(t, nil, "export", dir, "--format", "csv", "-o", "-")
		if r.code != 0 || !strings.Contains(r.stderr, "as csv") {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		rows, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != run.NumEvents()+1 || rows[0][0] != "rank" {
			t.Errorf("%d rows for %d events; header %q", len(rows), run.NumEvents(), rows[0])
		}
		// One CSV writer: dump's CSV is export's.
		d := commprof(t, nil, "dump", dir, "--format", "csv")
		if d.code != 0 || d.stdout != r.stdout {
			t.Errorf("dump --format csv differs from export --format csv (exit %d)", d.code)
		}
	})

	t.Run("a cut stream is exported with a warning", func(t *testing.T) {
		cut := filepath.Join(t.TempDir(), "cut")
		if err := os.Mkdir(cut, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, rk := range run.Ranks {
			b, err := os.ReadFile(filepath.Join(dir, rk.File))
			if err != nil {
				t.Fatal(err)
			}
			if rk.Info.Rank == 2 {
				b = b[:len(b)-100]
			}
			if err := os.WriteFile(filepath.Join(cut, rk.File), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		r := commprof(t, nil, "export", cut, "--format", "perfetto", "-o", filepath.Join(cut, "t.json"))
		if r.code != 0 || !strings.Contains(r.stderr, "warning: rank 2 (rank-00002.arrows): trace stream was cut") {
			t.Errorf("exit %d\n%s", r.code, r.stderr)
		}
		if !json.Valid(mustRead(t, filepath.Join(cut, "t.json"))) {
			t.Error("the export of a cut run is not valid JSON")
		}
	})
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestExportErrors(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"export", empty, "--format", "speedscope"}, exitUsage, `--format "speedscope": want perfetto, pprof, csv`},
		{[]string{"export", empty}, exitUsage, "--format is required"},
		{[]string{"export", "--format", "csv"}, exitUsage, "takes 1 argument"},
		{[]string{"export", empty, "--format", "csv"}, exitError, "holds no rank-NNNNN.arrows"},
	} {
		r := commprof(t, nil, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}

// TestExportLeavesNoPartialFile makes the final rename fail: the
// temporary file is removed and nothing is left at the path.
func TestExportLeavesNoPartialFile(t *testing.T) {
	dir := t.TempDir()
	evs := []trace.Event{{Kind: trace.KindCompute, Name: "forward", Dur: 10, Peer: -1, Seq: -1, Step: -1, Root: -1, Chunk: -1}}
	f, err := os.Create(filepath.Join(dir, trace.RankFile(0)))
	if err != nil {
		t.Fatal(err)
	}
	w, err := trace.NewWriter(f, trace.RankInfo{Rank: 0, WorldSize: 1}, trace.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(evs); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "taken")
	if err := os.MkdirAll(filepath.Join(target, "x"), 0o755); err != nil { // a non-empty directory cannot be renamed over
		t.Fatal(err)
	}
	ios, _, stdout, _ := iostreams.Test()
	err = runExport(t.Context(), ios, &exportOptions{format: "csv", out: target}, dir)
	if err == nil {
		t.Fatal("exporting over a directory succeeded")
	}
	// An export stopped once its temporary file is made (Ctrl-C) leaves
	// neither the file nor its temporary one (.NAME.tmpXXXX beside it,
	// internal/atomicfile).
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	stopped := filepath.Join(dir, "stopped.csv")
	if err := runExport(ctx, ios, &exportOptions{format: "csv", out: stopped}, dir); !errors.Is(err, context.Canceled) {
		t.Fatalf("an export interrupted: %v", err)
	}
	if _, err := os.Stat(stopped); !os.IsNotExist(err) {
		t.Errorf("an interrupted export left %s (%v)", stopped, err)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".*.tmp*")); len(left) > 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
	if st, serr := os.Stat(target); serr != nil || !st.IsDir() {
		t.Errorf("the directory at the path was touched: %v", serr)
	}
	// The same export to a free path works and says what it wrote.
	stdout.Reset()
	if err := runExport(t.Context(), ios, &exportOptions{format: "csv", out: target + ".csv"}, dir); err != nil {
		t.Fatal(err)
	}
	if b := mustRead(t, target+".csv"); !strings.HasSuffix(string(b), "\n0,compute,forward,0,10,0,-1,-1,-1,,,-1,-1,,0,0,\n") {
		t.Errorf("csv:\n%s", b)
	}
	if !strings.Contains(stdout.String(), "1 events of 1 ranks as csv") {
		t.Errorf("summary %q", stdout.String())
	}
}
