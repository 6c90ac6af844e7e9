package importers

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/commprof/commprof/trace"
)

var update = flag.Bool("update", false, "rewrite the golden descriptions in testdata/golden")

// importRun imports paths into a fresh directory and reads the run back.
func importRun(t testing.TB, opt Options, paths ...string) (*Result, *trace.Run) {
	t.Helper()
	res, err := tryImport(t, opt, paths...)
	if err != nil {
		t.Fatalf("importing %v: %v", paths, err)
	}
	run, err := trace.ReadRun(res.Dir)
	if err != nil {
		t.Fatalf("reading the imported run: %v", err)
	}
	for _, rk := range run.Ranks {
		if rk.Truncated != nil {
			t.Fatalf("rank %d's stream is cut: %v", rk.Info.Rank, rk.Truncated)
		}
	}
	return res, run
}

func tryImport(t testing.TB, opt Options, paths ...string) (*Result, error) {
	t.Helper()
	if opt.Out == "" {
		opt.Out = filepath.Join(t.TempDir(), "run")
	}
	return Import(context.Background(), paths, opt)
}

// events returns a run's events of kind (0: every kind) and name ("":
// every name), rank by rank.
func events(run *trace.Run, kind trace.Kind, name string) []trace.Event {
	var out []trace.Event
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			if (kind == 0 || e.Kind == kind) && (name == "" || e.Name == name) {
				out = append(out, e)
			}
		}
	}
	return out
}

func rankEvents(run *trace.Run, rank int) []trace.Event {
	for _, rk := range run.Ranks {
		if rk.Info.Rank == rank {
			return rk.Events
		}
	}
	return nil
}

// find returns the event of kind on rank with seq, failing if there is
// not exactly one.
func find(t *testing.T, run *trace.Run, rank int, kind trace.Kind, seq int64) trace.Event {
	t.Helper()
	var got []trace.Event
	for _, e := range rankEvents(run, rank) {
		if e.Kind == kind && e.Seq == seq {
			got = append(got, e)
		}
	}
	if len(got) != 1 {
		t.Fatalf("rank %d: %d %s events with seq %d, want 1", rank, len(got), kind, seq)
	}
	return got[0]
}

func hasMissing(m *trace.Manifest, part string) bool {
	for _, s := range m.Source.Missing {
		if strings.Contains(s, part) {
			return true
		}
	}
	return false
}

const us = 1000 // ns

func TestImportHorovodTimeline(t *testing.T) {
	res, run := importRun(t, Options{}, "testdata/horovod_timeline.json")
	m := res.Manifest
	if res.Format != Horovod || m.WorldSize != 4 || len(run.Ranks) != 4 || m.Status != trace.StatusComplete {
		t.Fatalf("format %s, world %d, %d ranks, status %s", res.Format, m.WorldSize, len(run.Ranks), m.Status)
	}
	if got := m.Start.UnixMicro(); got != 1700000000000000 {
		t.Errorf("start %v, want the timeline's start_time_since_epoch_in_micros", m.Start)
	}
	if m.Source.Format != Horovod || m.Source.CollectiveMessages || !m.Source.ToolPhases || m.Config["horovod_backend"] != "MPI,NCCL" || m.Config["tensors"] != "4" {
		t.Errorf("source %+v config %v", m.Source, m.Config)
	}
	if n := run.NumEvents(); n != 31 {
		t.Errorf("%d events, want 31 (rank 0: 5 collectives, 5 negotiations, 8 phases, 1 mark; ranks 1-3: 4 collectives each)", n)
	}
	for r, want := range []int{19, 4, 4, 4} {
		if n := len(rankEvents(run, r)); n != want {
			t.Errorf("rank %d: %d events, want %d", r, n, want)
		}
	}
	// Call 0: every rank ready at its tick, all ending with rank 0's
	// operation at 2410 µs; rank 2 was last, 900 µs after rank 1.
	for r, tick := range map[int]int64{0: 1100, 1: 1000, 2: 1900, 3: 1200} {
		e := find(t, run, r, trace.KindCollective, 0)
		if e.Start != tick*us || e.End() != 2410*us || e.Name != "allreduce" || e.Label != "grad/conv1" || e.Bytes != 64*27*4 || e.DType != "float32" || e.Comm != "world" {
			t.Errorf("rank %d call 0: %+v", r, e)
		}
	}
	// Calls 1 and 2 are one fused response: consecutive seqs, one set of
	// phases carrying the first's seq, the buffer's bytes and a label
	// naming the fusion.
	w, b := find(t, run, 3, trace.KindCollective, 1), find(t, run, 3, trace.KindCollective, 2)
	if w.Label != "grad/fc.weight" || b.Label != "grad/fc.bias" || w.Bytes != 1000*512*2 || b.Bytes != 2000 || w.DType != "float16" {
		t.Errorf("fused calls: %+v %+v", w, b)
	}
	phases := map[string]trace.Event{}
	for _, e := range rankEvents(run, 0) {
		if e.Kind == trace.KindCompute && e.Seq == 1 && !strings.HasPrefix(e.Name, "horovod/negotiate") {
			phases[e.Name] = e
		}
		if e.Kind == trace.KindCompute && e.Seq == 2 && !strings.HasPrefix(e.Name, "horovod/negotiate") {
			t.Errorf("a fused response's phase carries its second tensor's seq: %+v", e)
		}
	}
	wantPhases := map[string][2]int64{"horovod/wait_for_data": {4002, 4060}, "horovod/memcpy_in_fusion_buffer": {4061, 4100},
		"horovod/nccl_allreduce": {4100, 5000}, "horovod/memcpy_out_fusion_buffer": {5001, 5041}}
	if len(phases) != len(wantPhases) {
		t.Errorf("fused response phases %v", phases)
	}
	for name, span := range wantPhases {
		p := phases[name]
		if p.Start != span[0]*us || p.End() != span[1]*us || p.Bytes != 1026000 || p.Label != "grad/fc.weight (+1 fused)" {
			t.Errorf("phase %s: %+v, want %v µs", name, p, span)
		}
	}
	// Call 3 went through the response cache: rank 0 alone, from the
	// start of its operation; its negotiation span is kept.
	for r := 1; r < 4; r++ {
		for _, e := range rankEvents(run, r) {
			if e.Seq == 3 {
				t.Errorf("rank %d has an event of the cached call: %+v", r, e)
			}
		}
	}
	if e := find(t, run, 0, trace.KindCollective, 3); e.Start != 6510*us || e.Dur != 300*us {
		t.Errorf("cached call on rank 0: %+v", e)
	}
	var neg3 []trace.Event
	for _, e := range rankEvents(run, 0) {
		if e.Name == "horovod/negotiate_allreduce" && e.Seq == 3 {
			neg3 = append(neg3, e)
		}
	}
	if len(neg3) != 1 || neg3[0].Start != 6010*us || neg3[0].Dur != 490*us {
		t.Errorf("cached call's negotiation: %+v", neg3)
	}
	// Call 4: a broadcast without dtype and shape.
	if e := find(t, run, 1, trace.KindCollective, 4); e.Name != "broadcast" || e.Bytes != 0 || e.Start != 7300*us || e.End() != 7410*us {
		t.Errorf("broadcast: %+v", e)
	}
	if marks := events(run, trace.KindMark, "horovod/cycle_start"); len(marks) != 1 || marks[0].Value != 1 || marks[0].Start != 6000*us {
		t.Errorf("cycle marks: %+v", marks)
	}
	for _, want := range []string{"per-rank readiness for 1 of 5 collectives", "message size and dtype of 1 collectives", "completion on ranks other than 0", "training compute"} {
		if !hasMissing(m, want) {
			t.Errorf("missing does not say %q: %q", want, m.Source.Missing)
		}
	}
	if len(m.Source.Skipped) != 0 {
		t.Errorf("skipped %v in a whole file", m.Source.Skipped)
	}
}

func TestImportHorovodOldUnclosed(t *testing.T) {
	// Older Horovod writes "},\n" after every event and never closes the
	// array: that is a whole file, not a cut one.
	res, run := importRun(t, Options{Format: Horovod}, "testdata/horovod_old.json")
	if res.Manifest.Status != trace.StatusComplete || res.Manifest.WorldSize != 2 {
		t.Fatalf("status %s world %d", res.Manifest.Status, res.Manifest.WorldSize)
	}
	e := find(t, run, 1, trace.KindCollective, 0)
	if e.Start != 50*us || e.End() != 91*us || e.Bytes != 80 || e.DType != "float64" {
		t.Errorf("%+v", e)
	}
	if !slices.ContainsFunc(res.Summary, func(s string) bool { return strings.Contains(s, "not closed") }) {
		t.Errorf("summary %q does not say the array is open", res.Summary)
	}
}

// TestHorovodCut cuts the timeline inside its last event, and at many
// other places: what comes before the cut is imported, the run says it
// was cut, and nothing panics.
func TestImportHorovodCut(t *testing.T) {
	whole, err := os.ReadFile("testdata/horovod_timeline.json")
	if err != nil {
		t.Fatal(err)
	}
	_, full := importRun(t, Options{}, "testdata/horovod_timeline.json")
	dir := t.TempDir()
	// Inside the broadcast's last end event.
	cutAt := bytes.LastIndex(whole, []byte(`{"ph": "E", "ts": 7410`)) + 10
	path := filepath.Join(dir, "cut.json")
	if err := os.WriteFile(path, whole[:cutAt], 0o644); err != nil {
		t.Fatal(err)
	}
	res, run := importRun(t, Options{}, path)
	m := res.Manifest
	if m.Status != trace.StatusInterrupted || !strings.Contains(m.Error, "cut inside an event") {
		t.Errorf("status %s, error %q", m.Status, m.Error)
	}
	if m.Source.Skipped["operations in flight when the timeline ends (no end event)"] != 1 {
		t.Errorf("skipped %v", m.Source.Skipped)
	}
	if n := len(events(run, trace.KindCollective, "broadcast")); n != 0 {
		t.Errorf("%d broadcast events from an operation that never ended", n)
	}
	if n := len(events(run, trace.KindCollective, "allreduce")); n != 1+4+4+4 {
		t.Errorf("%d allreduce events, want the 13 before the cut", n)
	}
	// Every other cut: an error saying it is not a timeline (nothing
	// complete), or a run whose events all appear in the whole import.
	type key struct {
		rank        int32
		kind        trace.Kind
		name, label string
		seq, start  int64
	}
	all := map[key]bool{}
	for _, e := range events(full, 0, "") {
		all[key{e.Rank, e.Kind, e.Name, e.Label, e.Seq, e.Start}] = true
	}
	for n := 0; n < len(whole); n += 97 {
		if err := os.WriteFile(path, whole[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := tryImport(t, Options{Format: Horovod}, path)
		if err != nil {
			if !errors.Is(err, ErrNotFormat) && !strings.Contains(err.Error(), "no events to import") {
				t.Fatalf("cut at %d: %v", n, err)
			}
			continue
		}
		run, err := trace.ReadRun(res.Dir)
		if err != nil {
			t.Fatalf("cut at %d: %v", n, err)
		}
		for _, e := range events(run, 0, "") {
			if e.Kind == trace.KindCompute || e.Kind == trace.KindMark {
				continue // a response's phases end where the cut is
			}
			if !all[key{e.Rank, e.Kind, e.Name, e.Label, e.Seq, e.Start}] {
				t.Fatalf("cut at %d: an event the whole file does not have: %+v", n, e)
			}
		}
	}
}

func TestImportKineto(t *testing.T) {
	// rank 1's file is gzipped; baseTimeNanoseconds follows the events.
	res, run := importRun(t, Options{}, "testdata/kineto_2ranks")
	m := res.Manifest
	if res.Format != Kineto || m.WorldSize != 2 || len(run.Ranks) != 2 || m.Source.Tool != "PyTorch profiler (Kineto), NCCL 2.21.5" {
		t.Fatalf("format %s world %d ranks %d tool %q", res.Format, m.WorldSize, len(run.Ranks), m.Source.Tool)
	}
	// The epoch is the earliest event (the Trace span at 900 µs).
	if m.Start.UnixNano() != 1700000000000000000+900*us {
		t.Errorf("start %v", m.Start)
	}
	for r, off := range []int64{0, 600} {
		var ar trace.Event
		for _, e := range rankEvents(run, r) {
			if e.Name == "allreduce" {
				ar = e
			}
		}
		if ar.Name != "allreduce" || ar.Comm != "world" || ar.Label != "default_pg" || ar.Bytes != 4<<20 || ar.DType != "float32" || ar.Algo != "ring" ||
			ar.Start != (2010+off-900)*us || ar.End() != (2910-900)*us || ar.Step != 3 || ar.Seq != 0 {
			t.Errorf("rank %d allreduce: %+v", r, ar)
		}
		var ag []trace.Event
		for _, e := range rankEvents(run, r) {
			if e.Name == "allgather" {
				ag = append(ag, e)
			}
		}
		if len(ag) != 1 || ag[0].Comm != "pg/1" || ag[0].Label != "tp_group" || ag[0].Bytes != 512*2 || ag[0].DType != "bfloat16" || ag[0].Seq != 0 {
			t.Errorf("rank %d allgather: %+v", r, ag)
		}
		var kinds = map[trace.Kind]int{}
		names := map[string]bool{}
		for _, e := range rankEvents(run, r) {
			kinds[e.Kind]++
			if e.Kind == trace.KindCompute {
				names[e.Name] = true
			}
		}
		// Compute is the GPU's: a kernel and a copy; the CPU op aten::mm
		// only launched work.
		want := map[trace.Kind]int{trace.KindCollective: 2, trace.KindWait: 1, trace.KindCompute: 2, trace.KindStep: 1}
		if fmt.Sprint(kinds) != fmt.Sprint(want) || names["aten::mm"] || !names["Memcpy HtoD (Pageable -> Device)"] ||
			!names["at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >"] {
			t.Errorf("rank %d: kinds %v, compute %v", r, kinds, names)
		}
		st := events(run, trace.KindStep, "")
		if len(st) != 2 || st[0].Step != 3 || st[0].Dur != 5000*us {
			t.Errorf("steps %+v", st)
		}
	}
	if !hasMissing(m, "the GPU kernels of 2 collectives") || !hasMissing(m, "CPU operators (2)") || !hasMissing(m, "numbered in call order") {
		t.Errorf("missing %q", m.Source.Missing)
	}
}

// TestImportKinetoCut: a profiler trace cut inside its events imports
// the events before the cut and says so.
func TestImportKinetoCut(t *testing.T) {
	whole, err := os.ReadFile("testdata/kineto_2ranks/rank0.pt.trace.json")
	if err != nil {
		t.Fatal(err)
	}
	cut := bytes.Index(whole, []byte(`"name": "ncclDevKernel_AllGather`))
	path := filepath.Join(t.TempDir(), "rank0.json")
	if err := os.WriteFile(path, whole[:cut], 0o644); err != nil {
		t.Fatal(err)
	}
	res, run := importRun(t, Options{}, path)
	m := res.Manifest
	if m.Status != trace.StatusInterrupted || !strings.Contains(m.Error, "cut inside an event") || !hasMissing(m, "the rest of") {
		t.Errorf("status %s error %q missing %q", m.Status, m.Error, m.Source.Missing)
	}
	// Before the cut: the allreduce, the copy and the kernel; the
	// allgather's kernel is lost, and its CPU call stands alone.
	if n := len(events(run, trace.KindCollective, "allreduce")); n != 1 {
		t.Errorf("%d allreduce events", n)
	}
	if n := len(events(run, trace.KindCompute, "")); n != 2 {
		t.Errorf("%d compute spans", n)
	}
	if !hasMissing(m, "the GPU kernels of 1 collectives") {
		t.Errorf("missing %q", m.Source.Missing)
	}
}

func TestImportKinetoOlder(t *testing.T) {
	// No Collective name: the nccl:<op> annotation around the kernel's
	// launch names it and gives its size; no distributedInfo.
	res, run := importRun(t, Options{Format: Kineto}, "testdata/kineto_old.json")
	if res.Manifest.WorldSize != 1 || !hasMissing(res.Manifest, "no distributedInfo") {
		t.Errorf("world %d, missing %q", res.Manifest.WorldSize, res.Manifest.Source.Missing)
	}
	ar, a2a := find(t, run, 0, trace.KindCollective, 0), find(t, run, 0, trace.KindCollective, 1)
	if ar.Name != "allreduce" || ar.Bytes != 4000 || ar.DType != "float32" || ar.Algo != "ring" || ar.Label != "nccl:all_reduce" || ar.Dur != 200*us || ar.Step != 7 {
		t.Errorf("allreduce %+v", ar)
	}
	if a2a.Name != "alltoall" || a2a.Bytes != 6144*8 || a2a.DType != "int64" || a2a.Dur != 500*us {
		t.Errorf("all_to_all %+v", a2a)
	}
}

func TestImportNCCLLog(t *testing.T) {
	for _, file := range []string{"nccl_debug.log", "nccl_debug_timestamps.log"} {
		t.Run(file, func(t *testing.T) {
			res, run := importRun(t, Options{}, filepath.Join("testdata", file))
			m := res.Manifest
			if res.Format != NCCLLog || m.WorldSize != 3 || m.Source.Tool != "NCCL 2.19.3+cuda12.2 debug log" {
				t.Fatalf("format %s world %d tool %q", res.Format, m.WorldSize, m.Source.Tool)
			}
			wantSkipped := map[string]int64{
				"NCCL lines cut or overwritten by another process's (not read)":        2,
				"per-call lines repeated byte for byte (the first is kept)":            1,
				"calls seen only in their NCCL CALL line: their per-call line is lost": 1,
			}
			if fmt.Sprint(m.Source.Skipped) != fmt.Sprint(wantSkipped) {
				t.Errorf("skipped %v", m.Source.Skipped)
			}
			for r, want := range []int{5, 4, 1} {
				if n := len(rankEvents(run, r)); n != want {
					t.Errorf("rank %d: %d calls, want %d", r, n, want)
				}
			}
			if ri := m.Ranks[0]; ri.Host != "node1" || ri.PID != 100 {
				t.Errorf("rank 0 is %s:%d", ri.Host, ri.PID)
			}
			ar0, ar1 := find(t, run, 0, trace.KindCollective, 0), find(t, run, 1, trace.KindCollective, 0)
			if ar0.Algo != "ring" || ar1.Algo != "tree" || ar0.Bytes != 4096 || ar0.Comm != "comm/0xaaa" || ar1.Comm != ar0.Comm {
				t.Errorf("opCount 0: %+v / %+v", ar0, ar1)
			}
			if bc := find(t, run, 1, trace.KindCollective, 1); bc.Name != "broadcast" || bc.Root != 1 || bc.Bytes != 80 || bc.DType != "int64" {
				t.Errorf("broadcast %+v", bc)
			}
			if ag := find(t, run, 0, trace.KindCollective, 2); ag.Bytes != 256*2*2 {
				t.Errorf("allgather bytes %d, want the whole output", ag.Bytes)
			}
			// opCount 3 of rank 1 is in the damaged half of a merged line.
			find(t, run, 0, trace.KindCollective, 3)
			for _, e := range rankEvents(run, 1) {
				if e.Seq == 3 {
					t.Errorf("rank 1 has a call recovered from a damaged line: %+v", e)
				}
			}
			sends, recvs := events(run, trace.KindSend, ""), events(run, trace.KindRecv, "")
			if len(sends) != 1 || len(recvs) != 1 || sends[0].Peer != 1 || recvs[0].Peer != 0 || sends[0].Name != "sendrecv" {
				t.Errorf("sends %+v recvs %+v", sends, recvs)
			}
			if rs := rankEvents(run, 2); len(rs) != 1 || rs[0].Comm != "comm/node2:300/0x3000" || rs[0].Bytes != 256 {
				t.Errorf("rank 2 (no init line): %+v", rs)
			}
			if !hasMissing(m, "node2:300 as rank 2") || !hasMissing(m, "1 calls between") {
				t.Errorf("missing %q", m.Source.Missing)
			}
			timed := strings.Contains(file, "timestamps")
			if timed != !hasMissing(m, "each call is placed at its opCount") {
				t.Errorf("timed %v but missing %q", timed, m.Source.Missing)
			}
			if timed && (ar1.Start-ar0.Start != 411*us || m.Start.Format("15:04:05.000000") != "10:00:00.001233") {
				t.Errorf("timestamps: rank 1 starts %d ns after rank 0, run starts %v", ar1.Start-ar0.Start, m.Start)
			}
		})
	}
}

func TestImportInspector(t *testing.T) {
	res, run := importRun(t, Options{}, "testdata/inspector_2procs")
	m := res.Manifest
	if res.Format != NCCLInspector || m.WorldSize != 2 || run.NumEvents() != 7 || m.Config["timing_source"] != "kernel_gpu" {
		t.Fatalf("format %s world %d events %d config %v", res.Format, m.WorldSize, run.NumEvents(), m.Config)
	}
	want := map[string]int64{"lines that are not a whole JSON object (cut or damaged)": 1, "records dumped twice (same communicator and coll_sn)": 1}
	if fmt.Sprint(m.Source.Skipped) != fmt.Sprint(want) {
		t.Errorf("skipped %v", m.Source.Skipped)
	}
	// Verbose records start at their first kernel; the others at the dump
	// time minus the execution time.
	base := int64(1752867229000000)
	a0, a1 := find(t, run, 0, trace.KindCollective, 0), find(t, run, 1, trace.KindCollective, 0)
	if a0.Start != 0 || a1.Start != 80*us || a0.Dur != 500*us || a0.Bytes != 1<<20 || a0.Comm != "world" || m.Start.UnixMicro() != base+480 {
		t.Errorf("verbose records: %+v %+v, run start %v", a0, a1, m.Start)
	}
	if g := find(t, run, 1, trace.KindCollective, 1); g.Name != "allgather" || g.Bytes != 2<<16 || g.Start != (base+2010-110-(base+480))*us {
		t.Errorf("allgather: %+v", g)
	}
	if rs := find(t, run, 1, trace.KindCollective, 2); rs.Name != "reducescatter" || rs.Bytes != 2<<16 {
		t.Errorf("reducescatter: %+v", rs)
	}
	if !hasMissing(m, "1 collectives whose coll_sn is skipped") || !hasMissing(m, "start times of 5 collectives") {
		t.Errorf("missing %q", m.Source.Missing)
	}
}

func TestImportNCCLTests(t *testing.T) {
	res, run := importRun(t, Options{}, "testdata/nccl_tests_all_gather.txt")
	m := res.Manifest
	if res.Format != NCCLTests || m.WorldSize != 4 || m.Config["op"] != "allgather" || m.Config["benchmark"] != "nccl-tests" ||
		m.Config["iters"] != "10" || m.Config["hosts"] != "2" || m.Source.Tool != "nccl-tests 2.13.9 all_gather_perf" {
		t.Fatalf("format %s world %d config %v tool %q", res.Format, m.WorldSize, m.Config, m.Source.Tool)
	}
	// 7 whole rows (the 8th is cut) x 10 calls x 4 ranks.
	if n := run.NumEvents(); n != 7*10*4 || m.Source.Skipped["result rows that do not parse (cut or damaged)"] != 1 {
		t.Errorf("%d events, skipped %v", n, m.Source.Skipped)
	}
	if ri := m.Ranks[3]; ri.Host != "gpu-a1" || ri.PID != 5003 {
		t.Errorf("rank 3 %+v", ri)
	}
	// Every call of a size lasts the table's time, on every rank at once.
	bySize := map[int64][]trace.Event{}
	for _, e := range events(run, trace.KindCollective, "allgather") {
		bySize[e.Bytes] = append(bySize[e.Bytes], e)
	}
	table := map[int64]float64{1024: 21.35, 4096: 22.10, 16384: 25.73, 65536: 38.9, 262144: 61.4, 1048576: 140.2, 4194304: 412.8}
	for size, tm := range table {
		evs := bySize[size]
		if len(evs) != 40 {
			t.Errorf("size %d: %d events", size, len(evs))
			continue
		}
		for _, e := range evs {
			if e.Dur != int64(tm*1000+0.5) || e.DType != "float32" {
				t.Errorf("size %d: %+v, want %.2f µs", size, e, tm)
				break
			}
		}
	}
	first := events(run, trace.KindCollective, "")
	sort.Slice(first, func(i, j int) bool {
		return first[i].Seq < first[j].Seq || first[i].Seq == first[j].Seq && first[i].Rank < first[j].Rank
	})
	if first[0].Start != 0 || first[4].Start != 21350 || first[4].Seq != 1 {
		t.Errorf("calls are not back to back: %+v %+v", first[0], first[4])
	}

	// An older output that names no collective: 2 ranks, where allreduce
	// and sendrecv have the same busbw factor.
	_, err := tryImport(t, Options{}, "testdata/nccl_tests_2ranks.txt")
	if err == nil || !strings.Contains(err.Error(), "pass --op") {
		t.Errorf("no --op: %v", err)
	}
	if _, err := tryImport(t, Options{Op: "allgather"}, "testdata/nccl_tests_2ranks.txt"); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Errorf("--op allgather: %v", err)
	}
	res, run = importRun(t, Options{Op: "all_reduce"}, "testdata/nccl_tests_2ranks.txt")
	if res.Manifest.Config["op"] != "allreduce" || run.NumEvents() != 7*20*2 || res.Manifest.Metrics["avg_busbw_gbps"] != 1.2345 || res.Manifest.Config["hosts"] != "1" {
		t.Errorf("--op all_reduce: config %v, %d events", res.Manifest.Config, run.NumEvents())
	}
}

// TestNotTheFormat: every importer refuses the others' files with an error
// naming the file, and detection refuses what is no trace.
func TestImportNotTheFormat(t *testing.T) {
	files := map[string]string{Horovod: "testdata/horovod_timeline.json", Kineto: "testdata/kineto_old.json", NCCLLog: "testdata/nccl_debug.log",
		NCCLInspector: "testdata/inspector_2procs/gpu-node-7-pid1002.log", NCCLTests: "testdata/nccl_tests_all_gather.txt"}
	for _, format := range Formats {
		for other, file := range files {
			if other == format {
				continue
			}
			_, err := tryImport(t, Options{Format: format}, file)
			if err == nil || !strings.Contains(err.Error(), file) {
				t.Errorf("%s importing %s's %s: %v", format, other, file, err)
			}
		}
	}
	dir := t.TempDir()
	for name, content := range map[string]string{"empty": "", "text": "hello\nworld\n", "json": `{"a": 1}`, "binary": "\x00\x01\x02\xff"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := tryImport(t, Options{}, p)
		if !errors.Is(err, ErrNotFormat) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := tryImport(t, Options{}, "testdata/horovod_timeline.json", "testdata/nccl_debug.log"); err == nil || !strings.Contains(err.Error(), "import them separately") {
		t.Errorf("mixed formats: %v", err)
	}
	if _, err := tryImport(t, Options{Format: "csv"}, "testdata/nccl_debug.log"); err == nil {
		t.Error("an unknown format was accepted")
	}
}

func TestImportOutMustBeEmpty(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, "keep.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Import(context.Background(), []string{"testdata/horovod_old.json"}, Options{Out: out})
	if err == nil || !strings.Contains(err.Error(), "keep.txt") {
		t.Fatalf("%v", err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "keep.txt")); err != nil || string(b) != "x" {
		t.Fatal("the existing directory was touched")
	}
	// A failed import leaves nothing behind.
	fresh := filepath.Join(t.TempDir(), "fresh")
	if _, err := Import(context.Background(), []string{"testdata/nccl_tests_2ranks.txt"}, Options{Out: fresh}); err == nil {
		t.Fatal("expected an error")
	}
	if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed import left %s: %v", fresh, err)
	}
}

// TestInterrupted: cancelling the import writes what was read as an
// interrupted run and returns the context's error.
func TestImportInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := filepath.Join(t.TempDir(), "run")
	res, err := Import(ctx, []string{"testdata/horovod_timeline.json"}, Options{Out: out, Progress: func(string, int64, int64) { cancel() }})
	if !errors.Is(err, context.Canceled) || res == nil || res.Manifest.Status != trace.StatusInterrupted {
		t.Fatalf("%v, %+v", err, res)
	}
	if _, err := trace.ReadRun(out); err != nil {
		t.Fatal(err)
	}
}

func TestImportDetect(t *testing.T) {
	for head, want := range map[string]string{
		"[\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 0, \"args\": {\"start_time_since_epoch_in_micros\":1}},": Horovod,
		`[{"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": 1, "pid": 1}`:                                                  Horovod,
		"{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [":                                                           Kineto,
		`{"traceEvents": [`: Kineto,
		`{"header":{"id":"0x1","rank":0,"n_ranks":2,"nnodes":1},"metadata":{},"coll_perf":{"coll":"AllReduce"}}` + "\n": NCCLInspector,
		"# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20":                         NCCLTests,
		"host:1:1 [0] NCCL INFO Bootstrap : Using eth0\n":                                                               NCCLLog,
		"[2024-01-01 00:00:00] host:1:1 [0] NCCL WARN x\n":                                                              NCCLLog,
		"some program output\nhost:12:12 NCCL CALL ncclGroupStart()\n":                                                  NCCLLog,
		`[1, 2, 3]`: "",
		"{}":        "",
		"":          "",
	} {
		if got, why := Detect([]byte(head)); got != want || (got == "" && why == "") {
			t.Errorf("%q: %q (%s), want %q", head, got, why, want)
		}
	}
}

func TestImportMicros(t *testing.T) {
	for in, want := range map[string]int64{"1": 1000, "4458676524648.797": 4458676524648797, "1.5": 1500, "0.0005": 0, "-2.25": -2250, "1e3": 1000000} {
		if got, ok := micros(json.Number(in)); !ok || got != want {
			t.Errorf("%s: %d %v, want %d", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "x", "1.2.3", "99999999999999999999"} {
		if _, ok := micros(json.Number(bad)); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestImportNCCLLogGroups: calls launched in one group share their
// opCount (NCCL 2.12 and later); each is a call of its own, numbered
// within the group so that seq stays unique and matches across ranks, and
// only a line repeated byte for byte is a repeat.
func TestImportNCCLLogGroups(t *testing.T) {
	res, run := importRun(t, Options{}, "testdata/nccl_grouped.log")
	m := res.Manifest
	if m.Source.Skipped["per-call lines repeated byte for byte (the first is kept)"] != 1 {
		t.Errorf("skipped %v, want the one repeated line", m.Source.Skipped)
	}
	// opCount 2 holds three allreduces on each rank: seq 20, 21, 22 (the
	// largest group has three collectives, so seq = opCount × 10 + index).
	want := map[int64]struct {
		name  string
		bytes int64
		dtype string
	}{0: {"broadcast", 4096 * 4, "float32"}, 20: {"allreduce", 1000 * 4, "float32"}, 21: {"allreduce", 250000 * 4, "float32"},
		22: {"allreduce", 64 * 8, "float64"}, 30: {"allreduce", 1000 * 4, "float32"}}
	for rank := range 2 {
		got := map[int64]trace.Event{}
		var sends, recvs []trace.Event
		for _, e := range rankEvents(run, rank) {
			switch e.Kind {
			case trace.KindSend:
				sends = append(sends, e)
			case trace.KindRecv:
				recvs = append(recvs, e)
			case trace.KindCollective:
				if _, dup := got[e.Seq]; dup {
					t.Errorf("rank %d: two calls with seq %d", rank, e.Seq)
				}
				got[e.Seq] = e
			}
		}
		if len(got) != len(want) {
			t.Errorf("rank %d: collectives %v, want seqs of %v", rank, got, want)
		}
		for seq, w := range want {
			e, ok := got[seq]
			if !ok || e.Name != w.name || e.Bytes != w.bytes || e.DType != w.dtype || e.Comm != "world" {
				t.Errorf("rank %d seq %d: %+v, want %+v", rank, seq, e, w)
			}
		}
		// The grouped Send and Recv are both there, with the other rank.
		if len(sends) != 1 || len(recvs) != 1 || sends[0].Peer != int32(1-rank) || recvs[0].Peer != int32(1-rank) || sends[0].Bytes != 262144*4 {
			t.Errorf("rank %d: sends %+v, recvs %+v", rank, sends, recvs)
		}
	}
	said := false
	for _, s := range m.Source.Missing {
		said = said || strings.Contains(s, "opCount × 10 + its index")
	}
	if !said {
		t.Errorf("missing %q does not say how grouped calls are numbered", m.Source.Missing)
	}
}

// TestImportNCCLLogLosses: calls a process's log lost before its first
// and after its last recovered opCount are found against the other ranks
// of the communicator, as well as those lost in between.
func TestImportNCCLLogLosses(t *testing.T) {
	var b strings.Builder
	b.WriteString("h:1:1 [0] NCCL INFO ncclCommInitRank comm 0xa rank 0 nranks 2 cudaDev 0 busId 1 commId 0xc - Init COMPLETE\n")
	b.WriteString("h:2:2 [1] NCCL INFO ncclCommInitRank comm 0xb rank 1 nranks 2 cudaDev 1 busId 2 commId 0xc - Init COMPLETE\n")
	call := func(pid int, comm string, op int) {
		fmt.Fprintf(&b, "h:%d:%d [%d] NCCL INFO AllReduce: opCount %x sendbuff 0x10 recvbuff 0x10 count 8 datatype 7 op 0 root 0 comm %s [nranks=2] stream 0x1\n", pid, pid, pid-1, op, comm)
	}
	for op := 2; op <= 20; op++ { // rank 0: 2..20 but 7
		if op != 7 {
			call(1, "0xa", op)
		}
	}
	for op := 0; op <= 17; op++ { // rank 1: 0..17
		call(2, "0xb", op)
	}
	path := filepath.Join(t.TempDir(), "nccl.log")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	res, _ := importRun(t, Options{}, path)
	for _, want := range []string{ // opCounts in hex, as NCCL prints them
		"rank 0 (h:1) on world: the 2 calls before its first recovered opCount (2), which other ranks recorded from opCount 0",
		"rank 1 (h:2) on world: the 3 calls after its last recovered opCount (11), which other ranks recorded up to opCount 14",
		"1 calls between communicators' first and last recovered opCount",
	} {
		if !hasMissing(res.Manifest, want) {
			t.Errorf("missing %q lacks %q", res.Manifest.Source.Missing, want)
		}
	}
	if hasMissing(res.Manifest, "rank 0 (h:1) on world: the 0") || hasMissing(res.Manifest, "rank 1 (h:2) on world: the 2") {
		t.Errorf("missing %q names losses that are not", res.Manifest.Source.Missing)
	}
}

// TestImportCutGzip: a gzipped timeline cut between two events is cut,
// not complete. The same bytes uncompressed read as an array left open
// after a whole event, which older Horovod versions always write; but a
// gzip stream that stops before its end proves the file was cut.
func TestImportCutGzip(t *testing.T) {
	b, err := os.ReadFile("testdata/horovod_timeline.json")
	if err != nil {
		t.Fatal(err)
	}
	// Compress the timeline in pieces that end after an event's closing
	// brace, flushing after each, so that a cut at a flush point ends the
	// decompressed bytes exactly there.
	var pieces []string
	for rest := string(b); rest != ""; {
		i := strings.Index(rest, "},")
		if i < 0 {
			pieces = append(pieces, rest)
			break
		}
		pieces = append(pieces, rest[:i+1])
		rest = rest[i+1:]
	}
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	var flushed []int
	for _, p := range pieces {
		w.Write([]byte(p))
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		flushed = append(flushed, gz.Len())
	}
	w.Close()
	dir := t.TempDir()
	tried := 0
	for k := 1; k < len(pieces); k++ { // cut after piece k: a whole event ends there
		prefix := strings.Join(pieces[:k], "")
		if k%3 != 0 {
			continue // a third of the cuts will do
		}
		plain, cut := filepath.Join(dir, fmt.Sprintf("plain%d.json", k)), filepath.Join(dir, fmt.Sprintf("cut%d.json.gz", k))
		if err := os.WriteFile(plain, []byte(prefix), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cut, gz.Bytes()[:flushed[k-1]], 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := tryImport(t, Options{}, plain); err != nil {
			continue // before the first whole collective the prefix is no timeline
		}
		tried++
		pres, prun := importRun(t, Options{}, plain)
		gres, grun := importRun(t, Options{}, cut)
		if pres.Manifest.Status != trace.StatusInterrupted {
			t.Errorf("after %d events: the plain file, cut right after an event (no comma or bracket after it), is %s: %s", k, pres.Manifest.Status, pres.Manifest.Error)
		}
		if gres.Manifest.Status != trace.StatusInterrupted || !strings.Contains(gres.Manifest.Error, "gzip stream (cut)") {
			t.Errorf("after %d events: the cut gzip stream is %s (%q), want interrupted by a cut", k, gres.Manifest.Status, gres.Manifest.Error)
		}
		if prun.NumEvents() != grun.NumEvents() || prun.NumEvents() == 0 {
			t.Errorf("after %d events: %d events from the plain file, %d from the cut gzip", k, prun.NumEvents(), grun.NumEvents())
		}
	}
	if tried < 2 {
		t.Fatalf("only %d cuts between events tried", tried)
	}
}

// TestImportKinetoRanksFromDistributedInfo: a rank is what the trace's
// distributedInfo says, not what its file is called: rank0.json holding
// rank 1's trace and rank1.json rank 0's import as the fixture does.
func TestImportKinetoRanksFromDistributedInfo(t *testing.T) {
	dir := t.TempDir()
	r0, err := os.ReadFile("testdata/kineto_2ranks/rank0.pt.trace.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("testdata/kineto_2ranks/rank1.pt.trace.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(r1, []byte(`"rank": 1,`)) || !bytes.Contains(r0, []byte(`"rank": 0,`)) {
		t.Fatal("the fixture's distributedInfo is not what this test expects")
	}
	for name, b := range map[string][]byte{"rank0.json": r1, "rank1.json": r0} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wantRes, want := importRun(t, Options{}, "testdata/kineto_2ranks")
	gotRes, got := importRun(t, Options{}, dir)
	for r := range 2 {
		we, ge := rankEvents(want, r), rankEvents(got, r)
		if len(we) == 0 || !slices.Equal(we, ge) {
			t.Errorf("rank %d: %d events from the swapped files, %d from the fixture", r, len(ge), len(we))
		}
		if wi, gi := wantRes.Manifest.Ranks[r], gotRes.Manifest.Ranks[r]; wi.PID != gi.PID || wi.Host != gi.Host {
			t.Errorf("rank %d is pid %d on %q, want pid %d on %q", r, gi.PID, gi.Host, wi.PID, wi.Host)
		}
	}
	if hasMissing(gotRes.Manifest, "name order") {
		t.Errorf("ranks numbered by file name: %q", gotRes.Manifest.Source.Missing)
	}
}

// TestImportGzippedText: every format reads gzipped input, detected by its
// first bytes whatever the file's name, into the same run as the plain
// file.
func TestImportGzippedText(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		path string
		opt  Options
	}{
		{"testdata/nccl_debug.log", Options{}},
		{"testdata/nccl_debug_timestamps.log", Options{}},
		{"testdata/nccl_grouped.log", Options{}},
		{"testdata/nccl_tests_all_gather.txt", Options{}},
		{"testdata/nccl_tests_2ranks.txt", Options{Op: "allreduce"}},
		{"testdata/inspector_2procs/gpu-node-7-pid1001.log", Options{}},
		{"testdata/horovod_timeline.json", Options{}},
		{"testdata/kineto_old.json", Options{}},
	} {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			b, err := os.ReadFile(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			var gz bytes.Buffer
			w := gzip.NewWriter(&gz)
			w.Write(b)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			// No .gz in the name: gzip is told from the content.
			zpath := filepath.Join(dir, "z-"+filepath.Base(tc.path))
			if err := os.WriteFile(zpath, gz.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			pres, prun := importRun(t, tc.opt, tc.path)
			zres, zrun := importRun(t, tc.opt, zpath)
			if zres.Format != pres.Format || zres.InputBytes != int64(gz.Len()) {
				t.Errorf("format %s, %d input bytes; want %s and %d", zres.Format, zres.InputBytes, pres.Format, gz.Len())
			}
			if p, z := describe(pres, prun), strings.ReplaceAll(describe(zres, zrun), zpath, tc.path); p != z {
				t.Errorf("the gzipped file imports otherwise:\n%s\n---\n%s", z, p)
			}
		})
	}
}
