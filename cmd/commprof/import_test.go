package main

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
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
	ranking, _ := sk["last_arrival_ranking"].([]any)
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
	if u, _ := s["unknown"].([]any); !slices.Contains(u, any("compute")) || !slices.Contains(u, any("exposed")) || !slices.Contains(u, any("overlapped")) {
		t.Errorf("unknown figures %v, want compute, exposed, overlapped among them", s["unknown"])
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

// TestImportNCCLTestsPredict: an imported nccl-tests table is a
// calibration predict can use, whether the output names the algorithm
// (NCCL_ALGO) or not (the run says the model assumes a ring).
//
// The link the fit finds follows from the table: a ring allreduce of n
// bytes on p ranks takes 2(p-1)α + 2(p-1)/p·n·β, and busbw is
// n·2(p-1)/p / time, so busbw = 1/β / (1 + p·α/(n·β)): it approaches the
// link 1/β as the latency term becomes small against the time. The
// latency term is at most about the smallest size's time, so in rows at
// least 20 times slower than that busbw is within 5% of the link, give
// or take how well the model fits the table.
func TestImportNCCLTestsPredict(t *testing.T) {
	for _, tc := range []struct {
		path, algo string
	}{
		{filepath.Join(importFixtures, "nccl_tests_all_reduce_ring.txt"), "ring"},
		{"../../../shared/data/nccl_tests/alcf_polaris_nccl218_n8g4_32ranks_all_reduce.dat", "unknown"},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			if _, err := os.Stat(tc.path); err != nil {
				t.Skipf("%s is not here: %v", tc.path, err)
			}
			rows := ntRows(t, tc.path)
			out := filepath.Join(t.TempDir(), "run")
			if r := commprof(t, nil, "import", "--out", out, tc.path); r.code != 0 {
				t.Fatalf("import: exit %d\n%s", r.code, r.stderr)
			}
			var m struct {
				Source struct{ Missing []string } `json:"source"`
			}
			readJSON(t, filepath.Join(out, "run.json"), &m)
			assumed := false
			for _, s := range m.Source.Missing {
				assumed = assumed || strings.Contains(s, "assumes a ring for allreduce")
			}
			if assumed != (tc.algo == "unknown") {
				t.Errorf("source.missing %q: says the model assumes a ring: %v, want %v", m.Source.Missing, assumed, tc.algo == "unknown")
			}
			r := commprof(t, nil, "predict", out, "--format", "json")
			if r.code != 0 {
				t.Fatalf("predict: exit %d\n%s", r.code, r.stderr)
			}
			var p struct {
				Fit struct {
					Usable   bool    `json:"usable"`
					Reason   string  `json:"reason"`
					Sizes    int     `json:"sizes"`
					LinkGBps float64 `json:"link_gbps"`
				} `json:"fit"`
				Projection *struct {
					Current int `json:"current_ranks"`
					Calls   []struct {
						Algo      string  `json:"algo"`
						Bytes     int64   `json:"bytes"`
						ModeledNS float64 `json:"modeled_ns"`
					} `json:"calls"`
					TimeNS [][]float64 `json:"time_ns"`
				} `json:"projection"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &p); err != nil {
				t.Fatalf("predict --format json: %v\n%s", err, r.stdout)
			}
			if !p.Fit.Usable || p.Fit.Sizes != len(rows.busbw) {
				t.Fatalf("fit usable %v (%s) over %d sizes; want usable over the table's %d", p.Fit.Usable, p.Fit.Reason, p.Fit.Sizes, len(rows.busbw))
			}
			if p.Projection == nil || p.Projection.Current != rows.ranks || len(p.Projection.Calls) != len(rows.busbw) || len(p.Projection.TimeNS) == 0 {
				t.Fatalf("projection %+v; want one of %d ranks over the table's %d sizes", p.Projection, rows.ranks, len(rows.busbw))
			}
			for _, c := range p.Projection.Calls {
				if c.Algo != tc.algo || !(c.ModeledNS > 0) {
					t.Errorf("projected call of %d bytes: algo %q, modelled %v ns; want %q and a time", c.Bytes, c.Algo, c.ModeledNS, tc.algo)
				}
			}
			var big []float64
			for size, bw := range rows.busbw {
				if rows.timeUS[size] >= 20*rows.minUS {
					big = append(big, bw)
				}
			}
			if len(big) == 0 {
				t.Fatalf("no row of the table is 20 times slower than its smallest")
			}
			slices.Sort(big)
			want := big[len(big)/2]
			if p.Fit.LinkGBps < want/1.3 || p.Fit.LinkGBps > want*1.3 {
				t.Errorf("fitted link %.2f GB/s; the table's bandwidth-bound rows have a median busbw of %.2f GB/s (%v)", p.Fit.LinkGBps, want, big)
			}
		})
	}
}

// ntTable is what a test reads of an nccl-tests table itself.
type ntTable struct {
	ranks  int
	busbw  map[int64]float64 // out-of-place, by size
	timeUS map[int64]float64
	minUS  float64
}

func ntRows(t *testing.T, path string) ntTable {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tb := ntTable{busbw: map[int64]float64{}, timeUS: map[int64]float64{}, minUS: math.Inf(1)}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "#" && f[1] == "Rank" {
			tb.ranks++
		}
		if len(f) < 13 || strings.HasPrefix(f[0], "#") {
			continue
		}
		size, err1 := strconv.ParseInt(f[0], 10, 64)
		us, err2 := strconv.ParseFloat(f[5], 64)
		bus, err3 := strconv.ParseFloat(f[7], 64)
		if err1 == nil && err2 == nil && err3 == nil {
			tb.busbw[size], tb.timeUS[size] = bus, us
			tb.minUS = min(tb.minUS, us)
		}
	}
	return tb
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestImportUntimedStats: an NCCL log has no durations, and without
// timestamps no times at all; stats says which figures are unknown and
// shows none read off the placeholders.
func TestImportUntimedStats(t *testing.T) {
	for _, tc := range []struct {
		file   string
		starts bool // the log has timestamps
	}{{"nccl_debug.log", false}, {"nccl_debug_timestamps.log", true}} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join(importFixtures, tc.file)
			out := filepath.Join(t.TempDir(), "run")
			if r := commprof(t, nil, "import", "--out", out, path); r.code != 0 {
				t.Fatalf("import: exit %d\n%s", r.code, r.stderr)
			}
			var m struct {
				Source struct {
					Untimed     bool `json:"untimed"`
					NoDurations bool `json:"no_durations"`
				} `json:"source"`
			}
			readJSON(t, filepath.Join(out, "run.json"), &m)
			if m.Source.Untimed == tc.starts || m.Source.NoDurations != tc.starts {
				t.Errorf("run.json source: untimed %v, no_durations %v", m.Source.Untimed, m.Source.NoDurations)
			}
			r := commprof(t, nil, "stats", out, "--format", "json")
			if r.code != 0 {
				t.Fatalf("stats: exit %d\n%s", r.code, r.stderr)
			}
			var s struct {
				Unknown []string `json:"unknown"`
				Run     struct {
					SpanNS int64 `json:"span_ns"`
				} `json:"run"`
				Headline struct {
					CommFraction float64 `json:"comm_fraction"`
					WaitFraction float64 `json:"wait_fraction"`
					BusBW        float64 `json:"busbw_gbps"`
					Straggler    int     `json:"straggler"`
				} `json:"headline"`
				Findings []string `json:"findings"`
				Ranks    []struct {
					CommNS       int64 `json:"comm_ns"`
					WaitNS       int64 `json:"wait_ns"`
					LastArrivals int64 `json:"last_arrivals"`
				} `json:"ranks"`
				Collectives []struct {
					Calls int64   `json:"calls"`
					BusBW float64 `json:"busbw_gbps"`
					Time  struct {
						Sum int64 `json:"sum_ns"`
					} `json:"time"`
				} `json:"collectives"`
				Skew struct {
					Calls int64 `json:"calls"`
					Dist  struct {
						N int64 `json:"n"`
					} `json:"dist"`
				} `json:"skew"`
				Stragglers struct {
					Replayed bool `json:"replayed"`
				} `json:"stragglers"`
				Fit struct {
					Usable bool `json:"usable"`
				} `json:"fit"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
				t.Fatal(err)
			}
			want := []string{"durations", "comm", "wait", "straggler", "bandwidth"}
			if !tc.starts {
				want = append(want, "span", "skew")
			}
			for _, u := range want {
				if !slices.Contains(s.Unknown, u) {
					t.Errorf("unknown %v lacks %s", s.Unknown, u)
				}
			}
			if tc.starts == (slices.Contains(s.Unknown, "skew") || s.Skew.Dist.N == 0) {
				t.Errorf("skew over %d calls, unknown %v: want it measured exactly when the log has times", s.Skew.Dist.N, s.Unknown)
			}
			if s.Skew.Calls == 0 {
				t.Error("no call matched across ranks: the counts are known whatever the times")
			}
			if h := s.Headline; h.CommFraction != 0 || h.WaitFraction != 0 || h.BusBW != 0 || h.Straggler != -1 || s.Stragglers.Replayed || s.Fit.Usable {
				t.Errorf("headline %+v, stragglers replayed %v, fit usable %v: figures from times the log does not have", h, s.Stragglers.Replayed, s.Fit.Usable)
			}
			if (s.Run.SpanNS == 0) != !tc.starts {
				t.Errorf("span %d ns", s.Run.SpanNS)
			}
			for i, rk := range s.Ranks {
				if rk.CommNS != 0 || rk.WaitNS != 0 || !tc.starts && rk.LastArrivals != 0 {
					t.Errorf("rank %d: %+v", i, rk)
				}
			}
			calls := int64(0)
			for _, c := range s.Collectives {
				calls += c.Calls
				if c.Time.Sum != 0 || c.BusBW != 0 {
					t.Errorf("collective %+v has a time or bandwidth", c)
				}
			}
			if calls == 0 {
				t.Error("no collectives counted")
			}
			for _, f := range s.Findings {
				if strings.Contains(f, "communication") || strings.Contains(f, "straggler") || strings.Contains(f, "waiting") {
					t.Errorf("finding %q speaks of a time the log does not have", f)
				}
			}
			r = commprof(t, nil, "stats", out, "--by", "rank")
			if !strings.Contains(r.stdout, "—") || strings.Contains(r.stdout, "0ns recorded") {
				t.Errorf("stats --by rank shows the unknown figures as numbers:\n%s", r.stdout)
			}
		})
	}
}

// horovodExpect is what a Horovod timeline itself says of each rank, read
// by the test from the file: over the negotiations whose ticks name two or
// more ranks, the time from each rank's tick to the end of the tensor's
// operation (its collective), and from its tick to the last rank's (its
// wait), as unions over the calls, in ns; and how many such calls.
type horovodExpect struct {
	calls      int
	comm, wait map[int]int64
	inCalls    map[int]int
}

func horovodFromFile(t *testing.T, path string) horovodExpect {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// An older timeline's array may be unclosed or cut: read whole events.
	dec := json.NewDecoder(strings.NewReader(strings.TrimSpace(string(b))))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	type ev struct {
		Name string `json:"name"`
		Ph   string `json:"ph"`
		TS   int64  `json:"ts"`
		PID  int    `json:"pid"`
	}
	type neg struct {
		ticks map[int]int64
		ended bool // the negotiation's span ended; its operation is next
	}
	depth := map[int]int{}
	open := map[int]*neg{}   // by pid: negotiation or operation in progress
	opDepth := map[int]int{} // the operation span's depth, by pid
	spans := map[int][][2]int64{}
	waits := map[int][][2]int64{}
	ex := horovodExpect{comm: map[int]int64{}, wait: map[int]int64{}, inCalls: map[int]int{}}
	for dec.More() {
		var e ev
		if err := dec.Decode(&e); err != nil {
			break
		}
		switch e.Ph {
		case "B":
			depth[e.PID]++
			n := open[e.PID]
			switch {
			case strings.HasPrefix(e.Name, "NEGOTIATE_"):
				open[e.PID] = &neg{ticks: map[int]int64{}}
			case n != nil && n.ended && opDepth[e.PID] == 0:
				opDepth[e.PID] = depth[e.PID]
			}
		case "E":
			n := open[e.PID]
			switch {
			case n != nil && !n.ended:
				n.ended = true
				if len(n.ticks) < 2 {
					delete(open, e.PID)
				}
			case n != nil && opDepth[e.PID] == depth[e.PID]:
				last := int64(math.MinInt64)
				for _, ts := range n.ticks {
					last = max(last, ts)
				}
				for r, ts := range n.ticks {
					spans[r] = append(spans[r], [2]int64{ts, e.TS})
					waits[r] = append(waits[r], [2]int64{ts, last})
					ex.inCalls[r]++
				}
				ex.calls++
				delete(open, e.PID)
				opDepth[e.PID] = 0
			}
			depth[e.PID]--
		case "X":
			if r, err := strconv.Atoi(e.Name); err == nil && open[e.PID] != nil && !open[e.PID].ended {
				open[e.PID].ticks[r] = e.TS
			}
		}
	}
	unionNS := func(s [][2]int64) int64 {
		slices.SortFunc(s, func(a, b [2]int64) int { return int(a[0] - b[0]) })
		var total, lo, hi int64
		for i, x := range s {
			if i == 0 || x[0] > hi {
				total += hi - lo
				lo, hi = x[0], x[1]
			} else {
				hi = max(hi, x[1])
			}
		}
		return 1000 * (total + hi - lo)
	}
	for r := range spans {
		ex.comm[r], ex.wait[r] = unionNS(spans[r]), unionNS(waits[r])
	}
	return ex
}

// TestImportHorovodPerRank: rank 0 holds every collective of a Horovod
// timeline and the other ranks only those their ticks name, so per-rank
// communication and waiting cover the calls several ranks hold, a wait is
// counted once however many negotiations it overlaps, and the run's
// communication fraction is unknown.
func TestImportHorovodPerRank(t *testing.T) {
	for _, path := range []string{filepath.Join(importFixtures, "horovod_timeline.json"), "../../../shared/data/horovod/atpesc_tf2_keras_cpu_8ranks.json"} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			if _, err := os.Stat(path); err != nil {
				t.Skipf("%s is not here: %v", path, err)
			}
			want := horovodFromFile(t, path)
			s := importAndStats(t, path)
			calls, _ := skewOf(t, s)
			if int(calls) != want.calls {
				t.Errorf("%v calls with several ranks' readiness, the file has %d", calls, want.calls)
			}
			for _, r := range s["ranks"].([]any) {
				rk := r.(map[string]any)
				rank := int(rk["rank"].(float64))
				comm, wait := int64(rk["comm_ns"].(float64)), int64(rk["wait_ns"].(float64))
				if comm != want.comm[rank] || wait != want.wait[rank] {
					t.Errorf("rank %d (in %d calls): comm %d ns, wait %d ns; the file gives %d and %d", rank, want.inCalls[rank], comm, wait, want.comm[rank], want.wait[rank])
				}
				if wait > comm {
					t.Errorf("rank %d waits %d ns of %d in communication", rank, wait, comm)
				}
			}
			h := s["headline"].(map[string]any)
			u, _ := s["unknown"].([]any)
			if h["comm_fraction"] != 0.0 || !slices.Contains(u, any("communication")) {
				t.Errorf("comm fraction %v, unknown %v: the run's communication fraction is not known", h["comm_fraction"], u)
			}
		})
	}
}

// TestImportedRunsEverywhere: a run imported from each format is a run
// like any other: report, export (every format), diff, predict and serve
// work on it, and what they give agrees with stats.
func TestImportedRunsEverywhere(t *testing.T) {
	runs := t.TempDir()
	formats := []struct{ name, path string }{
		{"horovod", filepath.Join(importFixtures, "horovod_timeline.json")},
		{"kineto", filepath.Join(importFixtures, "kineto_2ranks")},
		{"nccl-log", filepath.Join(importFixtures, "nccl_debug.log")},
		{"nccl-inspector", filepath.Join(importFixtures, "inspector_2procs")},
		{"nccl-tests", filepath.Join(importFixtures, "nccl_tests_all_reduce_ring.txt")},
	}
	for _, f := range formats {
		t.Run(f.name, func(t *testing.T) {
			dir := filepath.Join(runs, f.name)
			if r := commprof(t, nil, "import", "--out", dir, f.path); r.code != 0 {
				t.Fatalf("import: exit %d\n%s", r.code, r.stderr)
			}
			r := commprof(t, nil, "stats", dir, "--format", "json")
			var s struct {
				Run struct {
					Events int64 `json:"events"`
					Source struct {
						Format string `json:"format"`
					} `json:"source"`
				} `json:"run"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || s.Run.Source.Format != f.name || s.Run.Events == 0 {
				t.Fatalf("stats: %v, source %q, %d events", err, s.Run.Source.Format, s.Run.Events)
			}

			page := filepath.Join(dir, "report.html")
			if r := commprof(t, nil, "report", dir, "-o", page); r.code != 0 {
				t.Fatalf("report: exit %d\n%s", r.code, r.stderr)
			}
			b, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			// The page's summary is stats' JSON.
			_, data, _ := bytes.Cut(b, []byte(`<script type="application/json" id="summary-data">`))
			data, _, _ = bytes.Cut(data, []byte("</script>"))
			if err := sameJSON(data, []byte(r.stdout)); err != nil {
				t.Errorf("report %s: its summary is not stats': %v", page, err)
			}

			r = commprof(t, nil, "export", dir, "--format", "csv", "-o", "-")
			if lines := strings.Count(r.stdout, "\n"); r.code != 0 || int64(lines) != s.Run.Events+1 {
				t.Errorf("export csv: exit %d, %d lines for %d events\n%s", r.code, lines, s.Run.Events, r.stderr)
			}
			r = commprof(t, nil, "export", dir, "--format", "perfetto", "-o", "-")
			var pf struct {
				TraceEvents []json.RawMessage `json:"traceEvents"`
			}
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &pf) != nil || int64(len(pf.TraceEvents)) < s.Run.Events {
				t.Errorf("export perfetto: exit %d, %d trace events for %d events\n%s", r.code, len(pf.TraceEvents), s.Run.Events, r.stderr)
			}
			pb := filepath.Join(dir, "comm.pb.gz")
			r = commprof(t, nil, "export", dir, "--format", "pprof", "-o", pb)
			if b, err := os.ReadFile(pb); r.code != 0 || err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
				t.Errorf("export pprof: exit %d, %v\n%s", r.code, err, r.stderr)
			}
		})
	}
	if t.Failed() {
		return
	}
	// diff across sources, and predict where there is (nccl-tests) and
	// is not (a Horovod timeline) a model to fit.
	for _, pair := range [][2]string{{"horovod", "kineto"}, {"nccl-log", "nccl-tests"}, {"nccl-inspector", "nccl-tests"}} {
		if r := commprof(t, nil, "diff", filepath.Join(runs, pair[0]), filepath.Join(runs, pair[1])); r.code != 0 || r.stdout == "" {
			t.Errorf("diff %s %s: exit %d\n%s", pair[0], pair[1], r.code, r.stderr)
		}
	}
	if r := commprof(t, nil, "predict", filepath.Join(runs, "nccl-tests")); r.code != 0 {
		t.Errorf("predict nccl-tests: exit %d\n%s", r.code, r.stderr)
	}
	if r := commprof(t, nil, "predict", filepath.Join(runs, "horovod")); r.code != 1 || !strings.Contains(r.stderr, "no projection") {
		t.Errorf("predict horovod: exit %d, want 1 saying why there is no projection\n%s", r.code, r.stderr)
	}
	// serve lists every imported run and serves its report and summary.
	cmd, u, stderr := startServe(t, "--addr", "127.0.0.1:"+strconv.Itoa(freePort(t)), runs)
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	base := u.Scheme + "://" + u.Host
	code, list := fetchURL(t, c, base+"/")
	if code != 200 {
		t.Errorf("GET /: %d", code)
	}
	for _, f := range formats {
		if !bytes.Contains(list, []byte(`data-run="`+f.name+`"`)) {
			t.Errorf("the list does not show %s", f.name)
		}
		if code, page := fetchURL(t, c, base+"/runs/"+f.name+"/"); code != 200 || !bytes.Contains(page, []byte(`id="summary-data"`)) {
			t.Errorf("GET %s's report: %d", f.name, code)
		}
		code, js := fetchURL(t, c, base+"/runs/"+f.name+"/stats.json")
		want := commprof(t, nil, "stats", filepath.Join(runs, f.name), "--format", "json")
		if code != 200 {
			t.Errorf("%s's stats.json: %d", f.name, code)
		} else if err := sameJSON(js, []byte(want.stdout)); err != nil {
			t.Errorf("%s's stats.json is not what stats prints: %v", f.name, err)
		}
	}
	stopServe(t, cmd, stderr)
}
