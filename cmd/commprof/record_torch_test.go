package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/trace"
)

// torchPython returns an interpreter that imports torch.distributed, or
// skips the test.
func torchPython(t *testing.T) string {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		p, err := exec.LookPath(py)
		if err != nil {
			continue
		}
		if exec.Command(p, "-c", "import torch.distributed as d; assert d.is_available() and d.is_gloo_available()").Run() == nil {
			return p
		}
	}
	t.Skip("no python3 with torch.distributed and gloo here (Debian: apt-get install python3-torch)")
	return ""
}

func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "job.py")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// recordTorchJob records script on ranks local ranks and returns the run.
func recordTorchJob(t *testing.T, py string, ranks int, script string, args ...string) (string, *trace.Run) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run")
	cmd := append([]string{"record", "--ranks", fmt.Sprint(ranks), "--out", out, "--", py, script}, args...)
	code, stdout, stderr := inProcess(t, cmd...)
	if code != 0 {
		t.Fatalf("record exited %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	r, err := trace.ReadRun(out)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range r.Manifest.Ranks {
		if n := int64(len(r.Ranks[i].Events)); e.Events != n {
			t.Errorf("rank %d: run.json counts %d events, its stream holds %d", e.Rank, e.Events, n)
		}
	}
	return out, r
}

// knownCalls makes exactly the calls torchCallsWant lists, on 3 ranks.
const knownCalls = `
import torch, torch.distributed as dist
dist.init_process_group("gloo")
r, n = dist.get_rank(), dist.get_world_size()
dist.all_reduce(torch.ones(1000))
dist.broadcast(torch.zeros(10, dtype=torch.float64), src=2)
dist.all_reduce(torch.ones(256), async_op=True).wait()
dist.all_gather([torch.zeros(4, dtype=torch.int64) for _ in range(n)], torch.ones(4, dtype=torch.int64))
dist.all_to_all_single(torch.zeros(4 * n), torch.ones(4 * n))
dist.barrier()
g = dist.new_group([0, 2])
if r != 1:
    dist.all_reduce(torch.ones(3, dtype=torch.int32), group=g)
if r == 0:
    dist.send(torch.ones(5), 1, tag=7)
    dist.irecv(torch.zeros(9, dtype=torch.float16), 2).wait()
elif r == 1:
    dist.recv(torch.zeros(5), 0, tag=7)
else:
    dist.isend(torch.ones(9, dtype=torch.float16), 0).wait()
dist.reduce(torch.ones(100), dst=1)
dist.gather(torch.ones(2), [torch.zeros(2) for _ in range(n)] if r == 0 else None, dst=0)
dist.scatter(torch.zeros(2), [torch.ones(2) for _ in range(n)] if r == 0 else None, src=0)
`

type wantCall struct {
	kind       trace.Kind
	name, comm string
	bytes, seq int64
	root, peer int32
	dtype      string
	ranks      []int32
}

func torchCallsWant() []wantCall {
	all := []int32{0, 1, 2}
	c := func(name string, bytes, seq int64, root int32, dtype string) wantCall {
		return wantCall{kind: trace.KindCollective, name: name, comm: "world", bytes: bytes, seq: seq, root: root, peer: -1, dtype: dtype, ranks: all}
	}
	return []wantCall{
		c("allreduce", 4000, 0, -1, "float32"),
		c("broadcast", 80, 1, 2, "float64"),
		c("allreduce", 1024, 2, -1, "float32"),
		c("allgather", 3*4*8, 3, -1, "int64"),
		c("alltoall", 3*4*4, 4, -1, "float32"),
		c("barrier", 0, 5, -1, ""),
		{kind: trace.KindCollective, name: "allreduce", comm: "pg1", bytes: 12, seq: 0, root: -1, peer: -1, dtype: "int32", ranks: []int32{0, 2}},
		{kind: trace.KindSend, name: "send", comm: "world", bytes: 20, seq: 7, root: -1, peer: 1, dtype: "float32", ranks: []int32{0}},
		{kind: trace.KindRecv, name: "recv", comm: "world", bytes: 20, seq: 7, root: -1, peer: 0, dtype: "float32", ranks: []int32{1}},
		{kind: trace.KindSend, name: "send", comm: "world", bytes: 18, seq: 0, root: -1, peer: 0, dtype: "float16", ranks: []int32{2}},
		{kind: trace.KindRecv, name: "recv", comm: "world", bytes: 18, seq: 0, root: -1, peer: 2, dtype: "float16", ranks: []int32{0}},
		c("reduce", 400, 6, 1, "float32"),
		c("gather", 3*8, 7, 0, "float32"),
		c("scatter", 3*8, 8, 0, "float32"),
	}
}

// TestTorchKnownCalls records a torch.distributed program whose every
// call is known and checks each rank's events exactly: op, bytes, dtype,
// process group, sequence number, root and peer; and that the manifest
// names PyTorch, the backend and the groups.
func TestTorchKnownCalls(t *testing.T) {
	py := torchPython(t)
	dir, run := recordTorchJob(t, py, 3, writeScript(t, knownCalls))
	type key struct {
		kind       trace.Kind
		name, comm string
		bytes, seq int64
		root, peer int32
		dtype      string
	}
	got := map[int32]map[key]int{}
	for _, rk := range run.Ranks {
		got[int32(rk.Info.Rank)] = map[key]int{}
		for _, e := range rk.Events {
			switch e.Kind {
			case trace.KindCollective, trace.KindSend, trace.KindRecv:
				got[e.Rank][key{e.Kind, e.Name, e.Comm, e.Bytes, e.Seq, e.Root, e.Peer, e.DType}]++
				if e.Dur <= 0 {
					t.Errorf("rank %d: %s seq %d has duration %d", e.Rank, e.Name, e.Seq, e.Dur)
				}
			}
		}
	}
	want := map[int32]map[key]int{0: {}, 1: {}, 2: {}}
	for _, w := range torchCallsWant() {
		for _, r := range w.ranks {
			want[r][key{w.kind, w.name, w.comm, w.bytes, w.seq, w.root, w.peer, w.dtype}]++
		}
	}
	for r := int32(0); r < 3; r++ {
		for k, n := range want[r] {
			if got[r][k] != n {
				t.Errorf("rank %d: %d of %+v, want %d", r, got[r][k], k, n)
			}
		}
		for k, n := range got[r] {
			if want[r][k] == 0 {
				t.Errorf("rank %d: %d unexpected %+v", r, n, k)
			}
		}
	}
	m, err := trace.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Source == nil || m.Source.Format != "pytorch" || !strings.Contains(m.Source.Tool, "PyTorch") || m.Config["backend"] != "gloo" {
		t.Errorf("manifest source %+v, backend %q: want pytorch, gloo", m.Source, m.Config["backend"])
	}
	if m.Config["comm world"] != "0-2" || m.Config["comm pg1"] != "0,2" || m.Status != trace.StatusComplete {
		t.Errorf("manifest config %v, status %s", m.Config, m.Status)
	}
	// The report names PyTorch, the backend and the process groups.
	if code, _, stderr := inProcess(t, "report", dir); code != 0 {
		t.Fatalf("report: %d %s", code, stderr)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"a PyTorch job through torch.distributed", "(gloo)", "comm pg1"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the report does not say %q", want)
		}
	}
}

// ddpBuckets trains a DDP model of three bias-free layers whose bucket
// sizes follow from DDP's rule (buckets filled in reverse parameter order,
// each closed once it holds bucket_cap_mb).
const ddpBuckets = `
import torch, torch.distributed as dist, torch.nn as nn
dist.init_process_group("gloo")
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(1024, 256, bias=False), nn.ReLU(), nn.Linear(256, 1024, bias=False), nn.ReLU(), nn.Linear(1024, 10, bias=False))
ddp = nn.parallel.DistributedDataParallel(m, bucket_cap_mb=1)
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
for i in range(4):
    opt.zero_grad()
    ddp(torch.randn(8, 1024)).sum().backward()
    opt.step()
`

// TestTorchDDPBuckets: every step's gradient buckets are recorded as the
// allreduces they are, with the bucket sizes DDP's rule gives (a bucket
// is closed once it holds 1 MiB, torch's first-bucket size, or
// bucket_cap_mb: both 1 MiB here).
func TestTorchDDPBuckets(t *testing.T) {
	py := torchPython(t)
	_, run := recordTorchJob(t, py, 2, writeScript(t, ddpBuckets))
	// Parameters in reverse order: 10x1024, 1024x256, 256x1024 float32.
	params := []int64{10 * 1024 * 4, 1024 * 256 * 4, 256 * 1024 * 4}
	var want []int64
	var cur int64
	for _, p := range params {
		cur += p
		if cur >= 1<<20 {
			want = append(want, cur)
			cur = 0
		}
	}
	if cur > 0 {
		want = append(want, cur)
	}
	const steps = 4
	for _, rk := range run.Ranks {
		perStep := map[int32][]int64{}
		stepsSeen := 0
		for _, e := range rk.Events {
			if e.Kind == trace.KindStep {
				stepsSeen++
			}
			if e.Kind == trace.KindCollective && strings.HasPrefix(e.Label, "ddp bucket ") {
				var idx int
				fmt.Sscanf(e.Label, "ddp bucket %d", &idx)
				for len(perStep[e.Step]) <= idx {
					perStep[e.Step] = append(perStep[e.Step], 0)
				}
				perStep[e.Step][idx] = e.Bytes
				if e.Name != "allreduce" || e.Comm != "world" {
					t.Errorf("rank %d: bucket %d recorded as %s on %s", rk.Info.Rank, idx, e.Name, e.Comm)
				}
			}
		}
		if stepsSeen != steps {
			t.Errorf("rank %d: %d steps, want %d", rk.Info.Rank, stepsSeen, steps)
		}
		// DDP of torch 1.13 does not bucket the first iteration (one
		// bucket of every gradient), and buckets by the rule after it.
		if fmt.Sprint(perStep[0]) != fmt.Sprint([]int64{params[0] + params[1] + params[2]}) {
			t.Errorf("rank %d step 0: buckets %v bytes, want one of every parameter", rk.Info.Rank, perStep[0])
		}
		for s := int32(1); s < steps; s++ {
			if fmt.Sprint(perStep[s]) != fmt.Sprint(want) {
				t.Errorf("rank %d step %d: buckets %v bytes, want %v", rk.Info.Rank, s, perStep[s], want)
			}
		}
	}
}

// stalled has rank 1 sleep 0.2s before each of 6 DDP steps.
const stalled = `
import time, torch, torch.distributed as dist, torch.nn as nn
dist.init_process_group("gloo")
ddp = nn.parallel.DistributedDataParallel(nn.Linear(64, 64))
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
for i in range(6):
    if dist.get_rank() == 1:
        time.sleep(0.2)
    opt.zero_grad()
    ddp(torch.randn(4, 64)).sum().backward()
    opt.step()
`

// TestTorchStalledRank: a rank that sleeps before every step is named
// the straggler, with a cost near what it slept (tolerant: the machine
// is loaded).
func TestTorchStalledRank(t *testing.T) {
	py := torchPython(t)
	dir, _ := recordTorchJob(t, py, 2, writeScript(t, stalled))
	code, stdout, stderr := inProcess(t, "stats", dir, "--format", "json")
	if code != 0 {
		t.Fatalf("stats: %d %s", code, stderr)
	}
	var s struct {
		Stragglers struct {
			Ranks []struct {
				Rank   int   `json:"rank"`
				CostNS int64 `json:"cost_ns"`
			} `json:"ranks"`
			Named []int `json:"named"`
		} `json:"stragglers"`
		Headline struct {
			Straggler int `json:"straggler"`
		} `json:"headline"`
	}
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	rs := s.Stragglers.Ranks
	sort.Slice(rs, func(i, j int) bool { return rs[i].CostNS > rs[j].CostNS })
	if len(rs) == 0 || rs[0].Rank != 1 {
		t.Fatalf("costliest ranks %+v: want rank 1 first", rs)
	}
	// Six sleeps of 0.2s; the first step's may fall before the first
	// step's start, so at least five count.
	if c := float64(rs[0].CostNS) / 1e9; c < 0.5 || c > 2.4 {
		t.Errorf("rank 1 cost %.2fs; it slept 1.2s", c)
	}
	if s.Headline.Straggler != 1 {
		t.Errorf("headline straggler %d (named %v), want rank 1", s.Headline.Straggler, s.Stragglers.Named)
	}
}

// killed has rank 1 killed (SIGKILL: no Python exit) after five
// allreduces and a pause longer than the spool's flush interval.
const killed = `
import os, signal, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
for i in range(5):
    dist.all_reduce(torch.ones(64))
if dist.get_rank() == 1:
    time.sleep(0.5)
    os.kill(os.getpid(), signal.SIGKILL)
dist.all_reduce(torch.ones(64))
`

// TestTorchKilledRank: a rank killed mid-run leaves what it recorded
// readable, and the run says which rank failed.
func TestTorchKilledRank(t *testing.T) {
	py := torchPython(t)
	t.Setenv(envnames.Flush, "100ms")
	out := filepath.Join(t.TempDir(), "run")
	code, _, stderr := inProcess(t, "record", "--ranks", "2", "--out", out, "--", py, writeScript(t, killed))
	if code == 0 {
		t.Fatalf("record of a job whose rank was killed exited 0")
	}
	if !strings.Contains(stderr, "rank 1") {
		t.Errorf("stderr does not name rank 1:\n%s", stderr)
	}
	m, err := trace.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != trace.StatusFailed || !strings.Contains(m.Error, "rank 1") {
		t.Errorf("manifest status %s, error %q: want failed, naming rank 1", m.Status, m.Error)
	}
	r, err := trace.ReadRun(out)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, rk := range r.Ranks {
		if rk.Info.Rank != 1 {
			continue
		}
		for _, e := range rk.Events {
			if e.Kind == trace.KindCollective && e.Name == "allreduce" {
				n++
			}
		}
	}
	if n != 5 {
		t.Errorf("rank 1's stream holds %d allreduces, want the 5 it made before it was killed", n)
	}
}

// profiled trains the MLP of commprof train with DDP under PyTorch's own
// profiler, each step (forward, backward, optimizer) inside
// record_function, and writes the profiler's step durations (ns).
const profiled = `
import json, sys, torch, torch.distributed as dist, torch.nn as nn
from torch.autograd import profiler
dist.init_process_group("gloo")
torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))
with profiler.profile(use_kineto=False) as prof:
    for i in range(10):
        opt.zero_grad()
        with profiler.record_function("train_step"):
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
steps = sorted((e.time_range.start, e.time_range.end) for e in prof.function_events if e.name == "train_step")
with open(sys.argv[1] + ".%d" % dist.get_rank(), "w") as f:
    json.dump([(b - a) * 1000 for a, b in steps], f)
`

// TestTorchStepTimeAgainstProfiler: each recorded step of a DDP run lasts
// what PyTorch's profiler measured for it (its record_function around the
// step encloses commprof's step, from the DDP forward to the end of
// optimizer.step, by a few microseconds).
func TestTorchStepTimeAgainstProfiler(t *testing.T) {
	py := torchPython(t)
	prefix := filepath.Join(t.TempDir(), "profiler")
	_, run := recordTorchJob(t, py, 2, writeScript(t, profiled), prefix)
	for _, rk := range run.Ranks {
		b, err := os.ReadFile(fmt.Sprintf("%s.%d", prefix, rk.Info.Rank))
		if err != nil {
			t.Fatal(err)
		}
		var prof []float64
		if err := json.Unmarshal(b, &prof); err != nil {
			t.Fatal(err)
		}
		var ours []float64
		for _, e := range rk.Events {
			if e.Kind == trace.KindStep {
				ours = append(ours, float64(e.Dur))
			}
		}
		if len(ours) != len(prof) || len(ours) != 10 {
			t.Fatalf("rank %d: %d steps recorded, the profiler saw %d; want 10", rk.Info.Rank, len(ours), len(prof))
		}
		var ratios []float64
		for i := range ours {
			ratios = append(ratios, ours[i]/prof[i])
		}
		sort.Float64s(ratios)
		if med := ratios[len(ratios)/2]; med < 0.95 || med > 1.005 {
			t.Errorf("rank %d: median recorded/profiler step time %.4f (recorded %v, profiler %v)", rk.Info.Rank, med, ours, prof)
		}
	}
}

// nccl has every rank all_reduce on its own GPU through NCCL.
const nccl = `
import os, torch, torch.distributed as dist
dist.init_process_group("nccl")
r = dist.get_rank()
torch.cuda.set_device(r)
t = torch.ones(1 << 20, device="cuda")
for i in range(3):
    dist.all_reduce(t)
w = dist.all_reduce(t, async_op=True)
w.wait()
torch.cuda.synchronize()
`

// TestTorchNCCL records an NCCL job, one rank per GPU: each allreduce is
// recorded with its bytes, its completion taken from the work's future
// (the GPU's), so no call reads shorter than the kernel it waits for.
// It needs two GPUs and skips without them (docs/torch.md: untested where
// commprof is developed).
func TestTorchNCCL(t *testing.T) {
	py := torchPython(t)
	out, err := exec.Command(py, "-c", "import torch, torch.distributed as d; print(torch.cuda.device_count() if d.is_nccl_available() else 0)").Output()
	if err != nil || strings.TrimSpace(string(out)) == "0" || strings.TrimSpace(string(out)) == "1" {
		t.Skip("needs two CUDA GPUs and a torch built with NCCL")
	}
	_, run := recordTorchJob(t, py, 2, writeScript(t, nccl))
	for _, rk := range run.Ranks {
		n := 0
		for _, e := range rk.Events {
			if e.Kind == trace.KindCollective && e.Name == "allreduce" {
				n++
				if e.Bytes != 4<<20 || e.Dur <= 0 {
					t.Errorf("rank %d: allreduce of %d bytes in %d ns", rk.Info.Rank, e.Bytes, e.Dur)
				}
			}
		}
		if n != 4 {
			t.Errorf("rank %d: %d allreduces, want 4", rk.Info.Rank, n)
		}
	}
}

// TestTorchChainsSitecustomize: the user's own sitecustomize (on their
// PYTHONPATH) still runs under commprof's, and the job is recorded, even
// from a shell that holds another job's RANK and WORLD_SIZE.
func TestTorchChainsSitecustomize(t *testing.T) {
	py := torchPython(t)
	site := t.TempDir()
	if err := os.WriteFile(filepath.Join(site, "sitecustomize.py"), []byte("import os\nos.environ['USER_SITE_RAN'] = '1'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", site)
	// A shell left with another job's variables: record's ranks get their own.
	t.Setenv("RANK", "7")
	t.Setenv("WORLD_SIZE", "9")
	t.Setenv("MASTER_PORT", "1")
	script := writeScript(t, `
import os, torch, torch.distributed as dist
assert os.environ.get("USER_SITE_RAN") == "1", "the user's sitecustomize did not run"
dist.init_process_group("gloo")
dist.broadcast(torch.ones(3), src=0)
`)
	_, run := recordTorchJob(t, py, 2, script)
	for _, rk := range run.Ranks {
		n := 0
		for _, e := range rk.Events {
			if e.Kind == trace.KindCollective && e.Name == "broadcast" && e.Bytes == 12 {
				n++
			}
		}
		if n != 1 {
			t.Errorf("rank %d: %d broadcasts of 12 bytes, want 1", rk.Info.Rank, n)
		}
	}
}

// TestTorchSweep sweeps a DDP script over two batch sizes: each run gets
// its --batch-size, and the sweep compares their steps.
func TestTorchSweep(t *testing.T) {
	py := torchPython(t)
	script := writeScript(t, `
import argparse, torch, torch.distributed as dist, torch.nn as nn
p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, required=True)
p.add_argument("--steps", type=int, default=5)
a = p.parse_args()
dist.init_process_group("gloo")
ddp = nn.parallel.DistributedDataParallel(nn.Linear(32, 8))
opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
for i in range(a.steps):
    opt.zero_grad()
    ddp(torch.randn(a.batch_size, 32)).sum().backward()
    opt.step()
`)
	out := filepath.Join(t.TempDir(), "sweep")
	// The binary, not this process: the sweep runs its runs with it.
	r := commprof(t, nil, "sweep", "--out", out, "--ranks", "2", "--batch-sizes", "4,16", "--", py, script, "--steps", "6")
	if r.code != 0 {
		t.Fatalf("sweep exited %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	var sw struct {
		Configs []struct {
			BatchSize     int `json:"batch_size"`
			Failed        int `json:"failed"`
			SamplesPerSec struct {
				Mean float64 `json:"mean"`
			} `json:"samples_per_sec"`
		} `json:"configs"`
	}
	b, err := os.ReadFile(filepath.Join(out, "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sw); err != nil {
		t.Fatal(err)
	}
	if len(sw.Configs) != 2 {
		t.Fatalf("%d configurations, want 2: %s", len(sw.Configs), b)
	}
	for i, want := range []int{4, 16} {
		c := sw.Configs[i]
		if c.BatchSize != want || c.Failed != 0 || c.SamplesPerSec.Mean <= 0 {
			t.Errorf("configuration %d: %+v, want batch %d, recorded, with samples/s", i, c, want)
		}
	}
	for _, bs := range []string{"4", "16"} {
		m, err := trace.ReadManifest(filepath.Join(out, "r2-bs"+bs+"-lrnone-wu0"))
		if err != nil {
			t.Fatal(err)
		}
		if m.Config["batch_size"] != bs || m.Status != trace.StatusComplete {
			t.Errorf("run of batch %s: batch_size %q, status %s", bs, m.Config["batch_size"], m.Status)
		}
	}
}

// TestTorchUnderMpirun: a torch job started by Open MPI's mpirun is
// recorded as a PyTorch run, its ranks taking RANK and WORLD_SIZE from
// mpirun's variables.
func TestTorchUnderMpirun(t *testing.T) {
	py := torchPython(t)
	mpirun, err := exec.LookPath("mpirun.openmpi")
	if err != nil {
		t.Skip("no Open MPI mpirun here")
	}
	script := writeScript(t, `
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
assert dist.get_world_size() == 2 and os.environ["RANK"] == os.environ["OMPI_COMM_WORLD_RANK"]
dist.all_reduce(torch.ones(10))
dist.all_reduce(torch.ones(20))
`)
	out := filepath.Join(t.TempDir(), "run")
	code, stdout, stderr := inProcess(t, "record", "--out", out, "--", mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", py, script)
	if code != 0 {
		t.Fatalf("record exited %d\n%s\n%s", code, stdout, stderr)
	}
	m, err := trace.ReadManifest(out)
	if err != nil {
		t.Fatal(err)
	}
	if m.Launcher != "mpi" || m.Source == nil || m.Source.Format != "pytorch" || m.WorldSize != 2 || m.Status != trace.StatusComplete {
		t.Errorf("manifest: launcher %q, source %+v, world %d, status %s", m.Launcher, m.Source, m.WorldSize, m.Status)
	}
	run, err := trace.ReadRun(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, rk := range run.Ranks {
		var bytes []int64
		for _, e := range rk.Events {
			if e.Kind == trace.KindCollective {
				bytes = append(bytes, e.Bytes)
			}
		}
		if fmt.Sprint(bytes) != "[40 80]" {
			t.Errorf("rank %d: allreduces of %v bytes, want [40 80]", rk.Info.Rank, bytes)
		}
	}
}

// holdsMemory has rank 1 allocate and touch 96 MiB for a second between
// collectives.
const holdsMemory = `
import time, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1 << 14)
for i in range(3):
    dist.all_reduce(t)
if dist.get_rank() == 1:
    hold = torch.ones(96 << 18)  # 96 MiB of float32, every page written
    time.sleep(1.0)
    del hold
dist.barrier()
for i in range(3):
    dist.all_reduce(t)
`

// TestTorchSampledMemory: a PyTorch job's ranks sample their memory as
// commprof's own ranks and MPI programs do; the rank that held 96 MiB for a
// second peaks that much above its first reading, the other does not.
func TestTorchSampledMemory(t *testing.T) {
	py := torchPython(t)
	dir, _ := recordTorchJob(t, py, 2, writeScript(t, holdsMemory))
	code, stdout, stderr := inProcess(t, "stats", dir, "--format", "json")
	if code != 0 {
		t.Fatalf("stats: %d %s", code, stderr)
	}
	var s struct {
		Ranks []struct {
			Rank int   `json:"rank"`
			Peak int64 `json:"peak_rss_bytes"`
			Base int64 `json:"base_rss_bytes"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Ranks) != 2 {
		t.Fatalf("%d ranks", len(s.Ranks))
	}
	const held = 96 << 20
	for _, r := range s.Ranks {
		grew := r.Peak - r.Base
		if r.Base <= 0 {
			t.Errorf("rank %d: no first reading (base %d)", r.Rank, r.Base)
		}
		switch {
		case r.Rank == 1 && (grew < held || grew > held+24<<20):
			t.Errorf("rank 1 grew %d bytes above its first reading; it held %d (allowing 24 MiB of the allocator's own)", grew, held)
		case r.Rank == 0 && grew > 24<<20:
			t.Errorf("rank 0 grew %d bytes; it held nothing", grew)
		}
	}
}
