package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/internal/envnames"
)

// netns makes two network namespaces joined by a veth pair, 10.77.N.1 and
// 10.77.N.2, standing for two hosts. It needs root and iproute2.
func netns(t *testing.T) (a, b string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		if os.Getenv(envnames.RequireDeps) != "" {
			t.Fatal("ip not found; `make test` installs iproute2")
		}
		t.Skip("iproute2 not installed")
	}
	id := os.Getpid() % 200
	a, b = fmt.Sprintf("cpA%d", os.Getpid()), fmt.Sprintf("cpB%d", os.Getpid())
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	ip("netns", "add", a)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", a).Run() })
	ip("netns", "add", b)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", b).Run() })
	va, vb := fmt.Sprintf("cpva%d", id), fmt.Sprintf("cpvb%d", id)
	ip("link", "add", va, "netns", a, "type", "veth", "peer", "name", vb, "netns", b)
	ip("-n", a, "addr", "add", fmt.Sprintf("10.77.%d.1/24", id), "dev", va)
	ip("-n", b, "addr", "add", fmt.Sprintf("10.77.%d.2/24", id), "dev", vb)
	for _, ns := range []string{a, b} {
		ip("-n", ns, "link", "set", "lo", "up")
	}
	ip("-n", a, "link", "set", va, "up")
	ip("-n", b, "link", "set", vb, "up")
	return a, b
}

// shape caps both directions of the link between netns's namespaces a and
// b at rate with tc's token bucket filter (netem is not available here).
func shape(t *testing.T, a, b, rate string) {
	t.Helper()
	id := os.Getpid() % 200
	for ns, dev := range map[string]string{a: fmt.Sprintf("cpva%d", id), b: fmt.Sprintf("cpvb%d", id)} {
		out, err := exec.Command("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
			"rate", rate, "burst", "256kb", "latency", "100ms").CombinedOutput()
		if err != nil {
			t.Fatalf("tc on %s: %v\n%s", ns, err, out)
		}
	}
}

// recordOnHosts runs n ranks of commprof ARGS as hosts "hostA" (network
// namespace a) and "hostB" (b), perHost ranks on each in rank order,
// recording into dir. Each rank gets its host's name in a UTS namespace of
// its own, as on a real host.
func recordOnHosts(t *testing.T, a, b string, n, perHost int, dir string, args ...string) {
	t.Helper()
	master := fmt.Sprintf("10.77.%d.1", os.Getpid()%200)
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Fatal("unshare (util-linux) not found")
	}
	port := strconv.Itoa(freePort(t))
	runByHand(t, n, func(r int) *exec.Cmd {
		ns, host := a, "hostA"
		if r >= perHost {
			ns, host = b, "hostB"
		}
		cmd := exec.Command("ip", append([]string{"netns", "exec", ns, "unshare", "--uts", "sh", "-c", `hostname "$0" && exec "$@"`, host, bin}, args...)...)
		cmd.Env = append(cleanEnv(), "RANK="+strconv.Itoa(r), "WORLD_SIZE="+strconv.Itoa(n), "MASTER_ADDR="+master, "MASTER_PORT="+port,
			envnames.JoinTimeout+"=30s", envnames.TraceDir+"="+dir, envnames.RunID+"=netns")
		return cmd
	})
}

// TestTruthModelOverAShapedLink: two "hosts" joined by a link shaped to
// 400 Mbit/s (50 MB/s). Fitted on 2 ranks within one host and 2 across
// (a calibration of both levels), the model recovers the link's rate as
// bench measures it, and predicts a held-out run of 4 ranks, 2 per host
// (where two messages share the link at once), within 20% per size from
// 256 KiB.
func TestTruthModelOverAShapedLink(t *testing.T) {
	a, b := netns(t)
	shape(t, a, b, "400mbit")
	base := t.TempDir()
	bench := []string{"bench", "allreduce", "--min", "64K", "--max", "4M", "--factor", "4", "--iters", "20", "--warmup", "2"}
	local, across, held := filepath.Join(base, "local"), filepath.Join(base, "across"), filepath.Join(base, "four")
	recordOnHosts(t, a, b, 2, 2, local, bench...)
	recordOnHosts(t, a, b, 2, 1, across, bench...)
	recordOnHosts(t, a, b, 4, 2, held, bench...)
	s := statsJSON(t, across)
	var benchBW float64
	for _, c := range s.Collectives {
		if c.Op == "allreduce" && c.Bucket == analyze.SizeBucket(4<<20) {
			benchBW = c.BusBWGBps
		}
	}
	r := commprof(t, nil, "predict", local, across, "--ranks", "4", "--check", held, "--format", "json")
	var p analyze.Prediction
	if err := json.Unmarshal([]byte(r.stdout), &p); err != nil || r.code != 0 || p.Check == nil {
		t.Fatalf("predict: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	f := p.Fit
	t.Logf("link %.4f GB/s (bench across: %.4f), R² %.3f, alpha %.0f ns, beta within a host %.3g ns/B, between %.3g", f.LinkGBps, benchBW, f.CallR2, f.AlphaNS, f.BetaNSPerB, f.BetaNetNSPerB)
	if !f.Usable || math.Abs(f.LinkGBps-benchBW) > 0.1*benchBW || benchBW < 0.04 || benchBW > 0.052 {
		t.Errorf("the model's link %.4f GB/s is not within 10%% of bench's %.4f across a 0.05 GB/s link", f.LinkGBps, benchBW)
	}
	for _, c := range p.Check.Calls {
		e := (c.ModeledNS - c.MeasuredNS) / c.MeasuredNS
		t.Logf("4 ranks, %7d B %s: measured %.0f ns, predicted %.0f (%+.0f%%)", c.Bytes, c.Algo, c.MeasuredNS, c.ModeledNS, 100*e)
		if c.Bytes >= 256<<10 && math.Abs(e) > 0.2 {
			t.Errorf("%d bytes: predicted %+.0f%% off", c.Bytes, 100*e)
		}
	}
}

// TestTwoHosts runs 4-rank jobs over two network namespaces, two ranks on
// each, as torchrun would start them on two hosts: the ranks on the second
// host reach rank 0 and each other only across the veth link. With the
// default transport and with COMMPROF_TRANSPORT=shm, which fails the job
// unless the two ranks of each namespace share memory, each job mixes
// shared memory within each "host" and TCP between them, and rank 0's
// header says so; every collective bench runs, with every algorithm it
// takes, finds no wrong element at any size. With tcp every pair is TCP.
func TestTwoHosts(t *testing.T) {
	a, b := netns(t)
	master := fmt.Sprintf("10.77.%d.1", os.Getpid()%200)
	job := func(t *testing.T, transport string, args ...string) string {
		t.Helper()
		outs := runByHand(t, 4, func(r int) *exec.Cmd {
			ns := a
			if r >= 2 {
				ns = b
			}
			cmd := exec.Command("ip", append([]string{"netns", "exec", ns, bin, "bench"}, args...)...)
			cmd.Env = append(cleanEnv(), "RANK="+strconv.Itoa(r), "WORLD_SIZE=4", "MASTER_ADDR="+master, "MASTER_PORT=29500",
				envnames.JoinTimeout+"=30s", envnames.Transport+"="+transport)
			return cmd
		})
		return outs[0].String()
	}
	sizes := []string{"--min", "8", "--max", "4M", "--factor", "16", "--iters", "3", "--warmup", "1"}
	for _, transport := range []string{"", "shm"} {
		for _, op := range []collectives.Op{collectives.OpAllReduce, collectives.OpBroadcast, collectives.OpReduce, collectives.OpAllGather, collectives.OpReduceScatter} {
			for _, algo := range append([]collectives.Algo{collectives.AlgoAuto}, collectives.Algorithms(op)...) {
				t.Run(fmt.Sprintf("transport=%s/%s/%s", transport, op, algo), func(t *testing.T) {
					// A root on the second host, for broadcast and reduce.
					out := job(t, transport, append([]string{op.String(), "--algo", algo.String(), "--root", "3"}, sizes...)...)
					checkTable(t, out, 5) // 8·16^k ≤ 4M
					if want := "# rank 0's links: 1 peer through shared memory (1024 KiB rings"; !strings.Contains(out, want) || !strings.Contains(out, ", 2 peers through TCP (") {
						t.Errorf("rank 0 does not reach its host's rank through shared memory and the other host's through TCP:\n%s", out)
					}
				})
			}
		}
	}
	t.Run("transport=tcp", func(t *testing.T) {
		out := job(t, "tcp", append([]string{"allreduce"}, sizes...)...)
		checkTable(t, out, 5)
		if want := "# rank 0's links: 3 peers through TCP ("; !strings.Contains(out, want) {
			t.Errorf("want %q in\n%s", want, out)
		}
	})
}
