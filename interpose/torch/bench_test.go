package torch

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/commprof/commprof/internal/envnames"
)

// torchPython returns an interpreter that imports torch.distributed with
// gloo, or skips.
func torchPython(tb testing.TB) string {
	tb.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		p, err := exec.LookPath(py)
		if err == nil && exec.Command(p, "-c", "import torch.distributed as d; assert d.is_gloo_available()").Run() == nil {
			return p
		}
	}
	tb.Skip("no python3 with torch.distributed and gloo here (Debian: apt-get install python3-torch)")
	return ""
}

// costScript measures, on one rank, what the recorder adds to a call:
// rounds alternate the recorded dist.all_reduce and the original it wraps
// (same tensor, same process group), and the difference of the fastest
// rounds of each (the least disturbed, on a loaded machine) is the cost
// of recording one call; then it times DDP steps of the MLP of
// commprof train (784-256-128-10, batch 64) to put that cost in
// proportion. One rank: its step has no communication to wait for, so
// the share it gives is an upper bound.
const costScript = `
import json, statistics, sys, time, torch, torch.distributed as dist, torch.nn as nn
dist.init_process_group("gloo")
torch.set_num_threads(1)
calls = int(sys.argv[1])
t = torch.ones(16)
rec, plain = dist.all_reduce, dist.all_reduce.__wrapped__
ps, rs = [], []
for r in range(21):
    t0 = time.perf_counter_ns()
    for i in range(calls):
        plain(t)
    t1 = time.perf_counter_ns()
    for i in range(calls):
        rec(t)
    t2 = time.perf_counter_ns()
    ps.append((t1 - t0) / calls)
    rs.append((t2 - t1) / calls)
model = nn.parallel.DistributedDataParallel(nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
x, y = torch.randn(64, 784), torch.randint(0, 10, (64,))
steps = []
for i in range(60):
    t0 = time.perf_counter_ns()
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    steps.append(time.perf_counter_ns() - t0)
print(json.dumps({"call_ns": min(rs) - min(ps), "plain_ns": min(ps), "step_ns": statistics.median(steps[10:])}))
`

// BenchmarkRecordCall reports what recording one torch.distributed call
// costs (ns/call) and, from it, the share of a DDP step of the MLP that
// the recorder takes: one bucket allreduce and four spans (step, forward,
// backward, optimizer) per step, each counted at a call's cost.
func BenchmarkRecordCall(b *testing.B) {
	py := torchPython(b)
	pydir, err := Startup(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	run := b.TempDir()
	script := filepath.Join(b.TempDir(), "cost.py")
	if err := os.WriteFile(script, []byte(costScript), 0o644); err != nil {
		b.Fatal(err)
	}
	env, err := Env(pydir, true, os.Getenv)
	if err != nil {
		b.Fatal(err)
	}
	calls := max(b.N, 200)
	c := exec.Command(py, script, fmt.Sprint(calls))
	c.Env = append(append(os.Environ(), env...), envnames.TraceDir+"="+run, envnames.Rank+"=0", envnames.Size+"=1")
	out, err := c.Output()
	if err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	var r struct {
		CallNS  float64 `json:"call_ns"`
		PlainNS float64 `json:"plain_ns"`
		StepNS  float64 `json:"step_ns"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	if _, err := os.Stat(filepath.Join(run, SpoolFile(0))); err != nil {
		b.Fatalf("the recorder was not on: %v", err)
	}
	b.ReportMetric(r.CallNS, "ns/call")
	b.ReportMetric(r.PlainNS, "ns/plain-call")
	b.ReportMetric(r.StepNS, "ns/step")
	b.ReportMetric(100*5*r.CallNS/r.StepNS, "%step")
	b.ReportMetric(0, "ns/op")
}
