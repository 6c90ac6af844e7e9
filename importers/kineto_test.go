package importers

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/commprof/commprof/trace"
)

// TestImportKinetoLegacyGloo: PyTorch 1.13's export_chrome_trace without
// Kineto (a bare JSON array; testdata/torch113_gloo_legacy is its output
// for a 2-process gloo job) imports with one collective per gloo call,
// spanning the c10d call that entered it and gloo's work on its own
// thread. The expected calls are read from the files themselves.
func TestImportKinetoLegacyGloo(t *testing.T) {
	dir := "testdata/torch113_gloo_legacy"
	res, run := importRun(t, Options{}, dir)
	m := res.Manifest
	if res.Format != Kineto || len(run.Ranks) != 2 || !strings.Contains(m.Source.Tool, "without Kineto") {
		t.Fatalf("format %s, %d ranks, tool %q", res.Format, len(run.Ranks), m.Source.Tool)
	}
	for rank, file := range []string{"rank0.json", "rank1.json"} {
		var evs []struct {
			Name string `json:"name"`
			Ts   int64  `json:"ts"`
			Dur  int64  `json:"dur"`
		}
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &evs); err != nil {
			t.Fatal(err)
		}
		// Each gloo:<op> with the c10d::<op> that called it, in order.
		want := map[string]int{}
		var spans []string
		c10d := map[string][]int{}
		for i, e := range evs {
			if op, ok := strings.CutPrefix(e.Name, "c10d::"); ok {
				c10d[strings.TrimSuffix(op, "_")] = append(c10d[strings.TrimSuffix(op, "_")], i)
			}
		}
		for _, e := range evs {
			op, ok := strings.CutPrefix(e.Name, "gloo:")
			if !ok {
				continue
			}
			name := strings.ReplaceAll(op, "_", "")
			want[name]++
			c := evs[c10d[name][0]]
			c10d[name] = c10d[name][1:]
			spans = append(spans, fmt.Sprintf("%s %d-%d", name, min(c.Ts, e.Ts)*1000, max(c.Ts+c.Dur, e.Ts+e.Dur)*1000))
		}
		got := map[string]int{}
		var gotSpans []string
		for _, e := range rankEvents(run, rank) {
			if e.Kind != trace.KindCollective {
				continue
			}
			got[e.Name]++
			if e.Bytes != 0 || !strings.HasPrefix(e.Label, "gloo:") {
				t.Errorf("rank %d: %+v", rank, e)
			}
			gotSpans = append(gotSpans, fmt.Sprintf("%s %d-%d", e.Name, e.Start, e.End()))
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || want["allreduce"] != 3 {
			t.Errorf("rank %d: collectives %v, the file's gloo calls %v", rank, got, want)
		}
		// Times: the file's own, shifted to the run's epoch.
		shift := int64(-1)
		for _, e := range evs {
			if shift < 0 || e.Ts*1000 < shift {
				shift = e.Ts * 1000
			}
		}
		for i := range spans {
			var name string
			var a, b int64
			fmt.Sscanf(strings.Replace(spans[i], "-", " ", 1), "%s %d %d", &name, &a, &b)
			spans[i] = fmt.Sprintf("%s %d-%d", name, a-shift, b-shift)
		}
		if !sameShifted(gotSpans, spans) {
			t.Errorf("rank %d spans %v, want %v", rank, gotSpans, spans)
		}
	}
	if !hasMissing(m, "message size and dtype of 18 collectives") {
		t.Errorf("missing %q", m.Source.Missing)
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if c[j] < c[i] {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c
}

// sameShifted reports whether two lists of "name a-b" spans are the same
// up to one shift of every time (the run's epoch is the earliest event of
// every rank).
func sameShifted(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	parse := func(s string) (string, int64, int64) {
		var name string
		var x, y int64
		fmt.Sscanf(strings.Replace(s, "-", " ", 1), "%s %d %d", &name, &x, &y)
		return name, x, y
	}
	a, b = sortedByStart(a), sortedByStart(b)
	var d int64
	for i := range a {
		n1, x1, y1 := parse(a[i])
		n2, x2, y2 := parse(b[i])
		if i == 0 {
			d = x1 - x2
		}
		if n1 != n2 || x1-x2 != d || y1-y2 != d {
			return false
		}
	}
	return true
}

func sortedByStart(s []string) []string {
	c := append([]string(nil), s...)
	start := func(x string) int64 {
		var name string
		var a int64
		fmt.Sscanf(strings.Replace(x, "-", " ", 1), "%s %d", &name, &a)
		return a
	}
	for i := range c {
		for j := i + 1; j < len(c); j++ {
			if start(c[j]) < start(c[i]) {
				c[i], c[j] = c[j], c[i]
			}
		}
	}
	return c
}

// kinetoTrace writes a Kineto trace of rank with the given events.
func kinetoTrace(t *testing.T, dir, name string, rank int, events ...string) string {
	t.Helper()
	body := fmt.Sprintf(`{"schemaVersion": 1, "distributedInfo": {"backend": "gloo", "rank": %d, "world_size": 2}, "traceEvents": [%s], "baseTimeNanoseconds": 1700000000000000000}`,
		rank, strings.Join(events, ", "))
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func rpc(tid, ts, dur int, coll string, nelems int, ext int) string {
	return fmt.Sprintf(`{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 7, "tid": %d, "ts": %d, "dur": %d, "args": {"External id": %d, "Collective name": %q, "In msg nelems": %d, "Out msg nelems": %d, "dtype": "Float", "Group size": 2, "Process Group Name": "0", "Process Group Description": "default_pg"}}`,
		tid, ts, dur, ext, coll, nelems, nelems)
}

func cpuSpan(cat, name string, tid, ts, dur int) string {
	return fmt.Sprintf(`{"ph": "X", "cat": %q, "name": %q, "pid": 7, "tid": %d, "ts": %d, "dur": %d, "args": {}}`, cat, name, tid, ts, dur)
}

// TestImportKinetoOneCallOneEvent: a CPU-only trace's record_param_comms,
// its nested process-group annotation (nccl:, gloo:, on its thread or
// gloo's) and the c10d op around them are one collective with the
// record's size; a trace with kernels joins them to the kernel.
func TestImportKinetoOneCallOneEvent(t *testing.T) {
	dir := t.TempDir()
	// PyTorch 2.x, CPU only: c10d::allreduce_ > record_param_comms >
	// nccl:all_reduce on one thread; then a gloo broadcast whose work
	// runs on gloo's thread; then a barrier with an annotation alone.
	p := kinetoTrace(t, dir, "cpu.json", 0,
		cpuSpan("cpu_op", "ProfilerStep#2", 1, 0, 10000),
		cpuSpan("cpu_op", "c10d::allreduce_", 1, 100, 400),
		rpc(1, 120, 300, "allreduce", 1000, 5),
		cpuSpan("user_annotation", "nccl:all_reduce", 1, 150, 100),
		cpuSpan("cpu_op", "c10d::broadcast_", 1, 1000, 50),
		rpc(1, 1010, 30, "broadcast", 10, 6),
		cpuSpan("user_annotation", "gloo:broadcast", 2, 1020, 900),
		cpuSpan("user_annotation", "gloo:barrier", 2, 3000, 100),
		cpuSpan("cpu_op", "aten::add", 1, 5000, 100),
	)
	_, run := importRun(t, Options{}, p)
	var colls []trace.Event
	for _, e := range rankEvents(run, 0) {
		if e.Kind == trace.KindCollective {
			colls = append(colls, e)
		}
	}
	// The label is the process group's description when the trace gives it.
	want := []string{"allreduce 4000 100-500 default_pg", "broadcast 40 1000-1920 default_pg", "barrier 0 3000-3100 gloo:barrier"}
	var got []string
	for _, e := range colls {
		got = append(got, fmt.Sprintf("%s %d %d-%d %s", e.Name, e.Bytes, e.Start/1000, e.End()/1000, e.Label))
	}
	// The run's epoch is the first event (ts 0), so times read as in the file.
	if strings.Join(sortedByName(got), "; ") != strings.Join(sortedByName(want), "; ") {
		t.Errorf("collectives %q, want %q", got, want)
	}
}

func sortedByName(s []string) []string { return sortedCopy(s) }

// TestImportKinetoKernelWithoutCall: a kernel whose CPU call is missing and
// whose args name no collective is a collective of unknown op and size,
// named in missing with its share of time; a kernel whose own args carry
// the collective keeps it.
func TestImportKinetoKernelWithoutCall(t *testing.T) {
	dir := t.TempDir()
	p := kinetoTrace(t, dir, "gpu.json", 0,
		`{"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", "pid": 0, "tid": 7, "ts": 100, "dur": 300, "args": {"correlation": 99}}`,
		`{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_Generic", "pid": 0, "tid": 7, "ts": 1000, "dur": 100, "args": {"Collective name": "allreduce", "In msg nelems": 10, "Out msg nelems": 10, "dtype": "Float", "Process Group Name": "0", "Process Group Description": "default_pg"}}`,
	)
	res, run := importRun(t, Options{}, p)
	var got []string
	for _, e := range events(run, trace.KindCollective, "") {
		got = append(got, fmt.Sprintf("%s %d %s", e.Name, e.Bytes, e.Label))
	}
	want := "allreduce 40 default_pg; unknown 0 ncclKernel_AllReduce_RING_LL_Sum_float"
	if strings.Join(sortedCopy(got), "; ") != want {
		t.Errorf("collectives %q, want %q", got, want)
	}
	if !hasMissing(res.Manifest, "the op and size of 1 collectives (75% of the collectives' time)") {
		t.Errorf("missing %q", res.Manifest.Source.Missing)
	}
}

// TestImportTrailingData: a trace followed by more than white space (two
// profiler traces written into one file; a Horovod timeline padded with
// NULs) imports the first trace and says what was ignored.
func TestImportTrailingData(t *testing.T) {
	k, err := os.ReadFile("testdata/kineto_2ranks/rank0.pt.trace.json")
	if err != nil {
		t.Fatal(err)
	}
	h, err := os.ReadFile("testdata/horovod_timeline.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct {
		name, file string
		data       []byte
		want       string
	}{
		{"kineto twice", "twice.json", append(append(append([]byte{}, k...), '\n'), k...), "starting with another JSON value"},
		{"horovod and NULs", "hvd.json", append(append([]byte{}, h...), make([]byte, 4096)...), "4096 NUL bytes after the end of its JSON"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(dir, c.file)
			if err := os.WriteFile(p, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			res, run := importRun(t, Options{}, p)
			whole := filepath.Join(dir, "whole-"+c.file)
			if err := os.WriteFile(whole, c.data[:len(map[bool][]byte{true: k, false: h}[c.file == "twice.json"])], 0o644); err != nil {
				t.Fatal(err)
			}
			_, wrun := importRun(t, Options{}, whole)
			if run.NumEvents() != wrun.NumEvents() {
				t.Errorf("%d events, the trace alone %d", run.NumEvents(), wrun.NumEvents())
			}
			var skipped int64
			for reason, n := range res.Manifest.Source.Skipped {
				if strings.Contains(reason, "after the end") {
					skipped += n
				}
			}
			if !hasMissing(res.Manifest, c.want) || skipped == 0 {
				t.Errorf("missing %q, skipped %v", res.Manifest.Source.Missing, res.Manifest.Source.Skipped)
			}
		})
	}
}
