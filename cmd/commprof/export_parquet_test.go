package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/trace"
)

// duckdbFigures runs tools/parquet-figures.mjs, the SQL of
// docs/export.md, over a Parquet export with DuckDB; it skips the test
// where node or the npm packages are missing.
func duckdbFigures(t *testing.T, dir string) map[string][]map[string]json.Number {
	t.Helper()
	node, err := exec.LookPath("node")
	if _, serr := os.Stat("../../node_modules/@duckdb/node-api"); err != nil || serr != nil {
		if os.Getenv(envnames.RequireDeps) != "" {
			t.Fatal("node or node_modules missing; `make test` installs them")
		}
		t.Skip("node or node_modules/@duckdb/node-api missing (npm ci)")
	}
	tool, _ := filepath.Abs("../../tools/parquet-figures.mjs")
	var stderr bytes.Buffer
	cmd := exec.Command(node, tool, dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("duckdb over %s: %v\n%s", dir, err, stderr.String())
	}
	// Every value as text: integers come as strings (exact), the rest as
	// numbers or strings.
	var raw map[string][]map[string]any
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("duckdb's figures: %v\n%s", err, out)
	}
	figs := map[string][]map[string]json.Number{}
	for name, rows := range raw {
		for _, r := range rows {
			row := map[string]json.Number{}
			for k, v := range r {
				switch v := v.(type) {
				case json.Number:
					row[k] = v
				case string:
					row[k] = json.Number(v)
				case nil:
					row[k] = "null"
				default:
					t.Fatalf("%s.%s: %T %v", name, k, v, v)
				}
			}
			figs[name] = append(figs[name], row)
		}
	}
	return figs
}

// parquetStats is the part of `stats --format json` the SQL computes.
type parquetStats struct {
	Ops []struct {
		Op     string `json:"op"`
		Calls  int64  `json:"calls"`
		Bytes  int64  `json:"bytes"`
		TimeNS int64  `json:"time_ns"`
		WaitNS int64  `json:"wait_ns"`
	} `json:"ops"`
	Collectives []struct {
		Op     string  `json:"op"`
		Algo   string  `json:"algo"`
		Bucket int     `json:"bucket"`
		Ranks  int     `json:"ranks"`
		Calls  int64   `json:"calls"`
		Bytes  int64   `json:"bytes"`
		WaitNS int64   `json:"wait_ns"`
		CallNS float64 `json:"call_ns"`
		AlgBW  float64 `json:"algbw_gbps"`
		BusBW  float64 `json:"busbw_gbps"`
		Time   struct {
			Sum int64 `json:"sum_ns"`
		} `json:"time"`
	} `json:"collectives"`
	Matrix struct {
		Ranks int `json:"ranks"`
		Cells []struct {
			Src      int64 `json:"src"`
			Dst      int64 `json:"dst"`
			Bytes    int64 `json:"bytes"`
			Messages int64 `json:"messages"`
			TimeNS   int64 `json:"time_ns"`
		} `json:"cells"`
	} `json:"matrix"`
	Ranks []struct {
		Rank         int     `json:"rank"`
		LastArrivals int64   `json:"last_arrivals"`
		MeanLateNS   float64 `json:"mean_late_ns"`
	} `json:"ranks"`
	Skew struct {
		Ranking []int `json:"last_arrival_ranking"`
	} `json:"skew"`
}

// compareFigures checks DuckDB's figures over the export against the
// summary: counts, bytes and times exactly, bandwidths and means to
// floating-point rounding.
func compareFigures(t *testing.T, s *parquetStats, figs map[string][]map[string]json.Number) {
	t.Helper()
	i64 := func(where string, n json.Number) int64 {
		v, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			t.Fatalf("%s: %q is not an integer", where, n)
		}
		return v
	}
	f64 := func(where string, n json.Number) float64 {
		v, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			t.Fatalf("%s: %q is not a number", where, n)
		}
		return v
	}
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(math.Abs(a), math.Abs(b)) }

	if len(figs["ops"]) != len(s.Ops) {
		t.Errorf("ops: duckdb has %d, stats %d", len(figs["ops"]), len(s.Ops))
	}
	for i, o := range s.Ops {
		if i >= len(figs["ops"]) {
			break
		}
		r := figs["ops"][i] // both most time first
		got := fields(r["op"], i64("calls", r["calls"]), i64("bytes", r["bytes"]), i64("time_ns", r["time_ns"]), i64("wait_ns", r["wait_ns"]))
		if want := fields(o.Op, o.Calls, o.Bytes, o.TimeNS, o.WaitNS); got != want {
			t.Errorf("ops[%d]: duckdb %s, stats %s (op calls bytes time_ns wait_ns)", i, got, want)
		}
	}

	if len(figs["collectives"]) != len(s.Collectives) {
		t.Errorf("collectives: duckdb has %d groups, stats %d", len(figs["collectives"]), len(s.Collectives))
	}
	for i, c := range s.Collectives {
		if i >= len(figs["collectives"]) {
			break
		}
		r := figs["collectives"][i] // both by op, algo, bucket
		what := fmt.Sprintf("collectives %s %s bucket %d", c.Op, c.Algo, c.Bucket)
		got := fields(r["op"], r["algo"], i64(what, r["bucket"]), i64(what, r["ranks"]), i64(what, r["calls"]), i64(what, r["bytes"]),
			i64(what, r["time_ns"]), i64(what, r["wait_ns"]))
		want := fields(c.Op, c.Algo, c.Bucket, c.Ranks, c.Calls, c.Bytes, c.Time.Sum, c.WaitNS)
		if got != want {
			t.Errorf("%s: duckdb %s, stats %s (op algo bucket ranks calls bytes time_ns wait_ns)", what, got, want)
		}
		if a, b := f64(what, r["busbw_gbps"]), c.BusBW; !near(a, b) {
			t.Errorf("%s: busbw %v GB/s in duckdb, %v in stats", what, a, b)
		}
		if a, b := f64(what, r["algbw_gbps"]), c.AlgBW; !near(a, b) {
			t.Errorf("%s: algbw %v GB/s in duckdb, %v in stats", what, a, b)
		}
		// stats gives call_ns as the size over algbw, 0 for empty calls.
		if a, b := f64(what, r["call_ns"]), c.CallNS; c.Bytes > 0 && !near(a, b) {
			t.Errorf("%s: %v ns per call in duckdb, %v in stats", what, a, b)
		}
	}

	cells := map[[2]int64][3]int64{}
	for _, r := range figs["matrix"] {
		cells[[2]int64{i64("src", r["src"]), i64("dst", r["dst"])}] = [3]int64{i64("bytes", r["bytes"]), i64("messages", r["messages"]), i64("time_ns", r["time_ns"])}
	}
	var traffic int64
	for _, c := range s.Matrix.Cells {
		want := [3]int64{c.Bytes, c.Messages, c.TimeNS}
		if got := cells[[2]int64{c.Src, c.Dst}]; got != want {
			t.Errorf("matrix[%d][%d]: duckdb %v, stats %v (bytes messages time_ns)", c.Src, c.Dst, got, want)
		}
		delete(cells, [2]int64{c.Src, c.Dst})
		traffic += want[0]
	}
	if len(cells) > 0 {
		t.Errorf("duckdb's matrix has cells stats has not: %v", cells)
	}

	var ranking []int
	late := map[int]map[string]json.Number{}
	for _, r := range figs["late"] {
		rk := int(i64("rank", r["rank"]))
		ranking = append(ranking, rk)
		late[rk] = r
	}
	if fmt.Sprint(ranking) != fmt.Sprint(s.Skew.Ranking) {
		t.Errorf("last-arrival ranking: duckdb %v, stats %v", ranking, s.Skew.Ranking)
	}
	for _, r := range s.Ranks {
		l, ok := late[r.Rank]
		if !ok {
			continue
		}
		if got := i64("last_arrivals", l["last_arrivals"]); got != r.LastArrivals {
			t.Errorf("rank %d: last in %d calls in duckdb, %d in stats", r.Rank, got, r.LastArrivals)
		}
		if got := f64("mean_late_ns", l["mean_late_ns"]); !near(got, r.MeanLateNS) {
			t.Errorf("rank %d: %v ns late in duckdb, %v in stats", r.Rank, got, r.MeanLateNS)
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("%d ops, %d collective groups, %d B of traffic, ranking %v: equal", len(s.Ops), len(s.Collectives), traffic, ranking)
}

// TestExportParquetDuckDB exports runs as Parquet and checks DuckDB's
// answers to the SQL of docs/export.md against `commprof stats` on the
// same run: recorded benchmarks and training, a run whose rank 2 was held
// back on purpose (which must come first in the last-arrival ranking),
// and an imported nccl-tests table of 32 ranks.
func TestExportParquetDuckDB(t *testing.T) {
	tmp := t.TempDir()
	late := filepath.Join(tmp, "late")
	r := commprof(t, nil, "record", "--ranks", "4", "--out", late, "--inject", "delay:rank=2,dur=2ms,every=1", "--",
		"bench", "allgather", "--min", "1K", "--max", "64K", "--iters", "5", "--warmup", "2")
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s", r.code, r.stderr)
	}
	runs := []struct {
		name, dir string
		first     int // the rank the ranking must start with; -1 for any
	}{
		{"bench", benchRun, -1},
		{"train", trainRun, -1},
		{"delayed-rank-2", late, 2},
	}
	if table := "../../../shared/data/nccl_tests/alcf_polaris_nccl218_n8g4_32ranks_all_reduce.dat"; fileExists(table) {
		dir := filepath.Join(tmp, "nccl-tests")
		if code, _, stderr := inProcess(t, "import", table, "--out", dir); code != 0 {
			t.Fatalf("import: exit %d\n%s", code, stderr)
		}
		runs = append(runs, struct {
			name, dir string
			first     int
		}{"nccl-tests-32", dir, -1})
	}
	for _, run := range runs {
		t.Run(run.name, func(t *testing.T) {
			out := filepath.Join(tmp, run.name+".parquet")
			code, stdout, stderr := inProcess(t, "export", run.dir, "--format", "parquet", "-o", out)
			if code != 0 {
				t.Fatalf("export: exit %d\n%s", code, stderr)
			}
			rf, err := trace.OpenRun(run.dir)
			if err != nil {
				t.Fatal(err)
			}
			events, _ := rawEvents(t, run.dir)
			if !strings.Contains(stdout, fmt.Sprintf("%d events of %d ranks", events, len(rf.Streams))) {
				t.Errorf("export says %q; the run has %d events of %d ranks", stdout, events, len(rf.Streams))
			}
			checkParquetLayout(t, out, len(rf.Streams))
			code, js, stderr := inProcess(t, "stats", run.dir, "--format", "json")
			if code != 0 {
				t.Fatalf("stats: exit %d\n%s", code, stderr)
			}
			var s parquetStats
			if err := json.Unmarshal([]byte(js), &s); err != nil {
				t.Fatal(err)
			}
			if len(s.Ops) == 0 {
				t.Fatal("stats has no ops: nothing to compare")
			}
			compareFigures(t, &s, duckdbFigures(t, out))
			if run.first >= 0 && (len(s.Skew.Ranking) == 0 || s.Skew.Ranking[0] != run.first) {
				t.Errorf("rank %d was held back before every call, but the ranking is %v", run.first, s.Skew.Ranking)
			}
		})
	}
}

// checkParquetLayout checks the export's directory: rank=N/part-0.parquet
// for each of n ranks and no other file ending in .parquet.
func checkParquetLayout(t *testing.T, dir string, n int) {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") {
			rel, _ := filepath.Rel(dir, p)
			files = append(files, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != n {
		t.Fatalf("%d .parquet files under %s, want %d: %v", len(files), dir, n, files)
	}
	for _, f := range files {
		var r int
		if _, err := fmt.Sscanf(f, "rank=%d/part-0.parquet", &r); err != nil || f != fmt.Sprintf("rank=%d/part-0.parquet", r) {
			t.Errorf("%s is not rank=N/part-0.parquet", f)
		}
	}
}

// fields prints values separated by spaces.
func fields(v ...any) string { return strings.TrimSuffix(fmt.Sprintln(v...), "\n") }

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestExportParquetDirectory: the export refuses a directory that holds
// anything unless --force, which leaves no other .parquet file under it;
// -o - and a file in the directory's place are refused with a reason.
func TestExportParquetDirectory(t *testing.T) {
	tmp := t.TempDir()
	out := filepath.Join(tmp, "pq")
	if code, _, stderr := inProcess(t, "export", benchRun, "--format", "parquet", "-o", out); code != 0 {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	checkParquetLayout(t, out, 2)
	before, err := os.ReadFile(filepath.Join(out, "rank=0", "part-0.parquet"))
	if err != nil {
		t.Fatal(err)
	}

	// Again into the same directory: refused, and nothing changed.
	code, _, stderr := inProcess(t, "export", trainRun, "--format", "parquet", "-o", out)
	if code != 1 || !strings.Contains(stderr, out+" is not empty") || !strings.Contains(stderr, "--force") {
		t.Errorf("a second export into %s: exit %d\n%s", out, code, stderr)
	}
	if after, _ := os.ReadFile(filepath.Join(out, "rank=0", "part-0.parquet")); !bytes.Equal(before, after) {
		t.Error("a refused export changed the files")
	}

	// --force replaces them and removes a stray file, a rank the new run
	// has not, which an engine would read as part of the table.
	stray := filepath.Join(out, "rank=7", "part-0.parquet")
	if err := os.MkdirAll(filepath.Dir(stray), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stray, []byte("PAR1"), 0o644); err != nil {
		t.Fatal(err)
	}
	keep := filepath.Join(out, "notes.txt")
	if err := os.WriteFile(keep, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := inProcess(t, "export", trainRun, "--format", "parquet", "-o", out, "--force"); code != 0 {
		t.Fatalf("export --force: exit %d\n%s", code, stderr)
	}
	checkParquetLayout(t, out, 2)
	if fileExists(filepath.Dir(stray)) || !fileExists(keep) {
		t.Errorf("--force: rank=7 left %v, notes.txt kept %v", fileExists(filepath.Dir(stray)), fileExists(keep))
	}
	if after, _ := os.ReadFile(filepath.Join(out, "rank=0", "part-0.parquet")); bytes.Equal(before, after) {
		t.Error("--force did not replace the bench run's file with the train run's")
	}

	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"-o", "-"}, "not a stream"},
		{[]string{"-o", keep}, "is a file"},
		{[]string{"-o", filepath.Join(tmp, "x.csv"), "--format", "csv", "--force"}, "--force is for --format parquet"},
	} {
		args := append([]string{"export", benchRun, "--format", "parquet"}, tc.args...)
		if code, _, stderr := inProcess(t, args...); code == 0 || !strings.Contains(stderr, tc.says) {
			t.Errorf("commprof %s: exit %d, want an error that says %q:\n%s", strings.Join(args, " "), code, tc.says, stderr)
		}
	}
}
