package importers

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/commprof/commprof/trace"
)

// The real traces of ../shared/data (see its SOURCES.md) are read from
// there, never copied into the repository; the tests skip when it is
// absent. The expected counts were computed from the files independently
// of the importers (by reading the JSON and text in Python), not from
// their output.

func realData(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join("..", "..", "shared", "data", rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is not here: %v", p, err)
	}
	return p
}

func TestImportRealHorovod(t *testing.T) {
	path := realData(t, "horovod/atpesc_tf2_keras_cpu_8ranks.json")
	res, run := importRun(t, Options{}, path)
	m := res.Manifest
	if res.Format != Horovod || m.WorldSize != 8 || len(run.Ranks) != 8 || m.Status != trace.StatusComplete {
		t.Fatalf("format %s world %d ranks %d status %s", res.Format, m.WorldSize, len(run.Ranks), m.Status)
	}
	// 1304 operations (1254 allreduce, 50 broadcast), each with its
	// negotiation; 1330 phase spans of 1013 responses; 59 negotiations
	// carry all 8 ticks, so ranks 1-7 have 59 events each.
	if n := run.NumEvents(); n != 4351 {
		t.Errorf("%d events, want 4351", n)
	}
	for r := 1; r < 8; r++ {
		if n := len(rankEvents(run, r)); n != 59 {
			t.Errorf("rank %d: %d events, want 59", r, n)
		}
	}
	var colls, negs, phases int
	var bytes int64
	labels := map[string]bool{}
	fusedSeqs := map[int64]bool{}
	for _, e := range rankEvents(run, 0) {
		switch {
		case e.Kind == trace.KindCollective:
			colls++
			bytes += e.Bytes
			labels[e.Label] = true
		case strings.HasPrefix(e.Name, "horovod/negotiate_"):
			negs++
		case e.Kind == trace.KindCompute:
			phases++
			if e.Name == "horovod/memcpy_in_fusion_buffer" {
				fusedSeqs[e.Seq] = true
			}
		}
	}
	if colls != 1304 || negs != 1304 || phases != 1330 || len(labels) != 58 || bytes != 739127400 {
		t.Errorf("rank 0: %d collectives, %d negotiations, %d phases, %d tensors, %d bytes", colls, negs, phases, len(labels), bytes)
	}
	if len(fusedSeqs) != 158 {
		t.Errorf("%d fused responses, want 158", len(fusedSeqs))
	}
	// Arrival: per ticked call, the spread of the ticks and the last rank.
	bySeq := map[int64][]trace.Event{}
	for _, e := range events(run, trace.KindCollective, "") {
		bySeq[e.Seq] = append(bySeq[e.Seq], e)
	}
	var skew int64
	last := map[int32]int{}
	calls8 := 0
	for _, evs := range bySeq {
		if len(evs) < 2 {
			continue
		}
		calls8++
		lo, hi := evs[0], evs[0]
		for _, e := range evs {
			if e.Start < lo.Start {
				lo = e
			}
			if e.Start > hi.Start {
				hi = e
			}
			if e.End() != evs[0].End() {
				t.Fatalf("seq %d: ranks end at different times", e.Seq)
			}
		}
		skew += hi.Start - lo.Start
		last[hi.Rank]++
	}
	want := map[int32]int{7: 19, 2: 16, 3: 9, 5: 8, 4: 4, 0: 3}
	if calls8 != 59 || skew != 754123*us || len(last) != len(want) {
		t.Errorf("%d ticked calls, skew %d ns, last %v", calls8, skew, last)
	}
	for r, n := range want {
		if last[r] != n {
			t.Errorf("rank %d last in %d calls, want %d", r, last[r], n)
		}
	}
	if got := m.Start.Format("2006-01-02T15:04:05.000000"); got != "2021-08-12T16:34:33.782626" {
		t.Errorf("start %s", got)
	}
	if !hasMissing(m, "per-rank readiness for 1245 of 1304 collectives") || !hasMissing(m, "message size and dtype of 50 collectives") {
		t.Errorf("missing %q", m.Source.Missing)
	}
}

func TestImportRealKineto(t *testing.T) {
	t.Run("hta", func(t *testing.T) {
		path := realData(t, "kineto/hta_nccl_data_rank0_of2.json.gz")
		res, run := importRun(t, Options{}, path)
		m := res.Manifest
		if m.WorldSize != 2 || len(run.Ranks) != 1 || !hasMissing(m, "1 of 2 ranks") || m.Source.Tool != "PyTorch profiler (Kineto), NCCL 2.17.1" {
			t.Fatalf("world %d ranks %d missing %q tool %q", m.WorldSize, len(run.Ranks), m.Source.Missing, m.Source.Tool)
		}
		// 15 allreduce and 6 broadcast kernels, 6 c10d waits, 3 profiler
		// steps (#4, #5, #6).
		n := map[string]int{}
		for _, e := range events(run, 0, "") {
			n[e.Kind.String()+"/"+e.Name]++
		}
		if n["collective/allreduce"] != 15 || n["collective/broadcast"] != 6 || n["wait/wait"] != 6 || n["step/step"] != 3 {
			t.Errorf("%v", n)
		}
		// Compute: every GPU kernel but NCCL's, every copy and every memset
		// the file holds (read here from the file itself: 2679 kernels,
		// 960 copies, 114 memsets); CPU operators on a GPU rank are not
		// compute (docs/import.md).
		gpu := kinetoGPUWork(t, path)
		if gpu["kernel"] != 2679 || gpu["gpu_memcpy"] != 960 || gpu["gpu_memset"] != 114 || gpu["nccl"] != n["collective/allreduce"]+n["collective/broadcast"] {
			t.Errorf("the file's GPU work %v is not what this test was written for", gpu)
		}
		compute := len(events(run, trace.KindCompute, ""))
		if want := gpu["kernel"] + gpu["gpu_memcpy"] + gpu["gpu_memset"]; compute != want {
			t.Errorf("%d compute spans, the file has %d GPU kernels (not NCCL's), copies and memsets", compute, want)
		}
		first := find(t, run, 0, trace.KindCollective, 2) // the first allreduce follows two broadcasts
		if first.Name != "allreduce" || first.Bytes != 2049000*4 || first.Dur != 3306963 || first.Algo != "ring" || first.Step != 4 {
			t.Errorf("first allreduce %+v", first)
		}
	})
	t.Run("dlrm", func(t *testing.T) {
		res, run := importRun(t, Options{}, realData(t, "kineto/param_dlrm_8ranks"))
		if res.Manifest.WorldSize != 8 || len(run.Ranks) != 8 {
			t.Fatalf("world %d ranks %d", res.Manifest.WorldSize, len(run.Ranks))
		}
		// Every rank: 5 all_to_all and 3 all_reduce of one step, in the
		// same order with the same sizes.
		var sig0 []string
		for _, rk := range run.Ranks {
			var calls []trace.Event
			for _, e := range rk.Events {
				if e.Kind == trace.KindCollective {
					calls = append(calls, e)
				}
			}
			sort.Slice(calls, func(i, j int) bool { return calls[i].Seq < calls[j].Seq })
			var sig []string
			for _, c := range calls {
				sig = append(sig, c.Name+"/"+strconv.FormatInt(c.Bytes, 10))
			}
			if len(calls) != 8 {
				t.Fatalf("rank %d: %d collectives", rk.Info.Rank, len(calls))
			}
			if sig0 == nil {
				sig0 = sig
			} else if strings.Join(sig, " ") != strings.Join(sig0, " ") {
				t.Errorf("rank %d calls %v, rank 0 %v", rk.Info.Rank, sig, sig0)
			}
		}
		want := "alltoall/24576 alltoall/192 alltoall/1536 alltoall/13568 allreduce/1576964 alltoall/24576 allreduce/448 allreduce/907840"
		if strings.Join(sig0, " ") != want {
			t.Errorf("calls %v, want %s", sig0, want)
		}
	})
}

func TestImportRealNCCLLog(t *testing.T) {
	res, run := importRun(t, Options{}, realData(t, "nccl_logs/sugarlxn_allreduce_2rank_trace.log"))
	m := res.Manifest
	if m.WorldSize != 2 || len(rankEvents(run, 0)) != 129 || len(rankEvents(run, 1)) != 448 {
		t.Fatalf("world %d, rank 0 %d calls, rank 1 %d", m.WorldSize, len(rankEvents(run, 0)), len(rankEvents(run, 1)))
	}
	// One fragment without a prefix and two lines another process wrote
	// into (found by scanning the file independently).
	if m.Source.Skipped["NCCL lines cut or overwritten by another process's (not read)"] != 3 ||
		m.Source.Skipped["calls seen only in their NCCL CALL line: their per-call line is lost"] != 1 {
		t.Errorf("skipped %v", m.Source.Skipped)
	}
	if m.Ranks[0].PID != 2491276 || !hasMissing(m, "is rank 0 of 0xec4ad54506d878f7") {
		t.Errorf("rank 0 pid %d, missing %q", m.Ranks[0].PID, m.Source.Missing)
	}
	// Both processes' calls 319-447 match; rank 0's carry NCCL's
	// algorithm (its "Bytes -> Algo RING" lines survived).
	for _, e := range rankEvents(run, 0) {
		if e.Seq < 319 || e.Comm != "world" || e.Algo != "ring" || e.DType != "int32" {
			t.Fatalf("rank 0 call %+v", e)
		}
	}
	seqs := map[int64]bool{}
	for _, e := range rankEvents(run, 1) {
		seqs[e.Seq] = true
	}
	if len(seqs) != 448 || !seqs[0] || !seqs[447] {
		t.Errorf("rank 1 has %d distinct opCounts", len(seqs))
	}
	// Rank 1's calls begin before rank 0's first recovered one: the run
	// says how many rank 0 lost at its start, and none at its end, where
	// both end alike.
	span := func(rank int) (lo, hi int64) {
		lo, hi = math.MaxInt64, -1
		for _, e := range rankEvents(run, rank) {
			lo, hi = min(lo, e.Seq), max(hi, e.Seq)
		}
		return lo, hi
	}
	lo0, hi0 := span(0)
	lo1, hi1 := span(1)
	if lo0 <= lo1 || hi0 != hi1 {
		t.Fatalf("rank 0 spans opCounts %d-%d, rank 1 %d-%d", lo0, hi0, lo1, hi1)
	}
	want := fmt.Sprintf("rank 0 (stone:2491276) on world: the %d calls before its first recovered opCount (%x), which other ranks recorded from opCount %x", lo0-lo1, lo0, lo1)
	if !hasMissing(m, want) || hasMissing(m, "after its last recovered opCount") {
		t.Errorf("missing %q: want %q and no loss at the end", m.Source.Missing, want)
	}
}

func TestImportRealInspector(t *testing.T) {
	dir := realData(t, "nccl_inspector/sugarlxn_allreduce_2rank")
	res, run := importRun(t, Options{}, dir)
	if res.Manifest.WorldSize != 2 || run.NumEvents() != 896 {
		t.Fatalf("world %d, %d events", res.Manifest.WorldSize, run.NumEvents())
	}
	// Each call's bytes over its duration is the plugin's own algbw (and,
	// on 2 ranks, its busbw), to the 6 decimals it prints.
	type key struct {
		rank int32
		sn   int64
	}
	algbw := map[key]float64{}
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			var rec struct {
				Header   struct{ Rank int32 } `json:"header"`
				CollPerf struct {
					SN     int64   `json:"coll_sn"`
					AlgoBW float64 `json:"coll_algobw_gbs"`
				} `json:"coll_perf"`
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatal(err)
			}
			algbw[key{rec.Header.Rank, rec.CollPerf.SN}] = rec.CollPerf.AlgoBW
		}
		fh.Close()
	}
	for _, e := range events(run, trace.KindCollective, "allreduce") {
		want := algbw[key{e.Rank, e.Seq}]
		if got := float64(e.Bytes) / float64(e.Dur); math.Abs(got-want) > 1e-6*want+1e-6 {
			t.Fatalf("rank %d sn %d: %g GB/s, the plugin says %g", e.Rank, e.Seq, got, want)
		}
	}
}

func TestImportRealNCCLTests(t *testing.T) {
	path := realData(t, "nccl_tests/alcf_polaris_nccl218_n8g4_32ranks_all_reduce.dat")
	res, run := importRun(t, Options{}, path)
	m := res.Manifest
	if m.WorldSize != 32 || m.Config["op"] != "allreduce" || m.Config["hosts"] != "8" || m.Config["iters"] != "20" || run.NumEvents() != 29*20*32 {
		t.Fatalf("world %d config %v events %d", m.WorldSize, m.Config, run.NumEvents())
	}
	// Each size's algbw (bytes over the call's time) and busbw (x 2(n-1)/n)
	// are the table's, to its two decimals.
	table := ntTable(t, path)
	seen := map[int64]bool{}
	for _, e := range events(run, trace.KindCollective, "allreduce") {
		if seen[e.Bytes] {
			continue
		}
		seen[e.Bytes] = true
		row, ok := table[e.Bytes]
		if !ok {
			t.Fatalf("size %d is not in the table", e.Bytes)
		}
		alg := float64(e.Bytes) / float64(e.Dur)
		if math.Abs(alg-row[0]) > 0.006 || math.Abs(alg*2*31/32-row[1]) > 0.006+1e-3*row[1] {
			t.Errorf("size %d: algbw %.4f busbw %.4f, table %.2f %.2f", e.Bytes, alg, alg*2*31/32, row[0], row[1])
		}
	}
	if len(seen) != 29 {
		t.Errorf("%d sizes", len(seen))
	}
}

// ntTable reads an nccl-tests table's out-of-place algbw and busbw by
// size, for tests.
func ntTable(t *testing.T, path string) map[int64][2]float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64][2]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 13 || strings.HasPrefix(f[0], "#") {
			continue
		}
		size, err1 := strconv.ParseInt(f[0], 10, 64)
		alg, err2 := strconv.ParseFloat(f[6], 64)
		bus, err3 := strconv.ParseFloat(f[7], 64)
		if err1 == nil && err2 == nil && err3 == nil {
			out[size] = [2]float64{alg, bus}
		}
	}
	return out
}

// kinetoGPUWork counts a Kineto trace's complete GPU events by category:
// kernels (NCCL's apart, as "nccl"), copies and memsets.
func kinetoGPUWork(t *testing.T, path string) map[string]int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Ph   string `json:"ph"`
			Cat  string `json:"cat"`
			Name string `json:"name"`
		} `json:"traceEvents"`
	}
	if err := json.NewDecoder(zr).Decode(&tr); err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, e := range tr.TraceEvents {
		switch {
		case e.Ph != "X":
		case e.Cat == "kernel" && strings.HasPrefix(e.Name, "nccl"):
			n["nccl"]++
		case e.Cat == "kernel", e.Cat == "gpu_memcpy", e.Cat == "gpu_memset":
			n[e.Cat]++
		}
	}
	return n
}
