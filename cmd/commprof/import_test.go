package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// importFixtures are the importers' synthetic fixtures.
const importFixtures = "../../importers/testdata"

// importAndStats imports files with the built binary and returns what
// stats --format json says of the run.
func importAndStats(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run")
	r := commprof(t, nil, append([]string{"import", "--out", out}, args...)...)
	if r.code != 0 {
		t.Fatalf("import %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "next: commprof report "+out) {
		t.Errorf("import's output:\n%s", r.stdout)
	}
	r = commprof(t, nil, "stats", out, "--format", "json")
	if r.code != 0 {
		t.Fatalf("stats: exit %d\n%s", r.code, r.stderr)
	}
	var s map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("stats --format json: %v", err)
	}
	return s
}

// skewOf returns the stats' count of calls with an arrival skew and its
// straggler ranking.
func skewOf(t *testing.T, s map[string]any) (float64, []any) {
	t.Helper()
	sk, _ := s["skew"].(map[string]any)
	calls, _ := sk["calls"].(float64)
	ranking, _ := sk["straggler_ranking"].([]any)
	return calls, ranking
}

func TestImportHorovodStats(t *testing.T) {
	// The fixture: 4 ranks, 4 of 5 collectives with every rank's
	// readiness; rank 3 was last in two of them.
	s := importAndStats(t, filepath.Join(importFixtures, "horovod_timeline.json"))
	calls, ranking := skewOf(t, s)
	if calls != 4 || len(ranking) == 0 || ranking[0] != 3.0 {
		t.Errorf("skew over %v calls, ranking %v; want 4 calls and rank 3 first", calls, ranking)
	}
	// Its compute spans are Horovod's phases: no figure of the program's
	// work is claimed.
	if u, _ := s["unknown"].([]any); len(u) != 3 || u[0] != "compute" || u[1] != "exposed" {
		t.Errorf("unknown figures %v, want compute, exposed, overlapped", s["unknown"])
	}
	for _, r := range s["ranks"].([]any) {
		rk := r.(map[string]any)
		if rk["compute_ns"] != 0.0 || rk["exposed_ns"] != 0.0 || rk["comm_ns"] == 0.0 {
			t.Errorf("rank %v: compute %v, exposed %v, comm %v", rk["rank"], rk["compute_ns"], rk["exposed_ns"], rk["comm_ns"])
		}
	}
	for _, f := range s["findings"].([]any) {
		if strings.Contains(f.(string), "exposed") {
			t.Errorf("a finding claims exposure: %q", f)
		}
	}
	path := "../../../shared/data/horovod/atpesc_tf2_keras_cpu_8ranks.json"
	if _, err := os.Stat(path); err != nil {
		t.Skipf("the real timeline is not here: %v", err)
	}
	// The real timeline: 59 negotiations carry every rank's tick; rank 7
	// was last in 19 of them, more than any other.
	s = importAndStats(t, path)
	calls, ranking = skewOf(t, s)
	if calls != 59 || len(ranking) == 0 || ranking[0] != 7.0 {
		t.Errorf("skew over %v calls, ranking %v; want 59 calls and rank 7 first", calls, ranking)
	}
}

// TestImportNCCLTestsBusBW: stats of an imported nccl-tests table show
// the table's bus bandwidth for every size (commprof's busbw is
// nccl-tests' definition).
func TestImportNCCLTestsBusBW(t *testing.T) {
	for _, path := range []string{filepath.Join(importFixtures, "nccl_tests_all_gather.txt"), "../../../shared/data/nccl_tests/alcf_polaris_nccl218_n8g4_32ranks_all_reduce.dat"} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			if _, err := os.Stat(path); err != nil {
				t.Skipf("%s is not here: %v", path, err)
			}
			table := busbwTable(t, path)
			s := importAndStats(t, path)
			colls, _ := s["collectives"].([]any)
			seen := 0
			for _, c := range colls {
				m, _ := c.(map[string]any)
				bytes, _ := m["bytes"].(float64)
				n, _ := m["calls"].(float64)
				busbw, _ := m["busbw_gbps"].(float64)
				if n == 0 {
					continue
				}
				size := int64(bytes / n)
				want, ok := table[size]
				if !ok {
					t.Errorf("stats has a size %d the table does not", size)
					continue
				}
				seen++
				// The table prints two decimals of a time it rounded too.
				if math.Abs(busbw-want) > 0.006+2e-3*want {
					t.Errorf("size %d: busbw %.4f GB/s, the table says %.2f", size, busbw, want)
				}
			}
			if seen != len(table) {
				t.Errorf("stats shows %d sizes, the table %d", seen, len(table))
			}
		})
	}
}

// busbwTable reads an nccl-tests table's whole rows: out-of-place busbw by
// size.
func busbwTable(t *testing.T, path string) map[int64]float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 13 || strings.HasPrefix(f[0], "#") {
			continue
		}
		size, err1 := strconv.ParseInt(f[0], 10, 64)
		bus, err2 := strconv.ParseFloat(f[7], 64)
		if err1 == nil && err2 == nil {
			out[size] = bus
		}
	}
	return out
}

func TestImportErrors(t *testing.T) {
	dir := t.TempDir()
	notTrace := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notTrace, []byte("nothing to see\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, "full")
	if err := os.MkdirAll(full, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	timeline := filepath.Join(importFixtures, "horovod_old.json")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"import", "--out", filepath.Join(dir, "a")}, 2, "at least one file"},
		{[]string{"import", "--format", "perfetto", "--out", filepath.Join(dir, "b"), timeline}, 2, "unknown format"},
		{[]string{"import", "--out", filepath.Join(dir, "c"), notTrace}, 1, notTrace + ":1: not a trace commprof imports"},
		{[]string{"import", "--format", "kineto", "--out", filepath.Join(dir, "d"), timeline}, 1, "not a PyTorch profiler trace"},
		{[]string{"import", "--out", full, timeline}, 1, "choose another --out"},
		{[]string{"import", "--out", filepath.Join(dir, "e"), filepath.Join(dir, "missing.json")}, 1, "no such file"},
	} {
		r := commprof(t, nil, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
}
