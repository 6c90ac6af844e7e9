package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// netns makes two network namespaces joined by a veth pair, 10.77.N.1 and
// 10.77.N.2, standing for two hosts. It needs root and iproute2.
func netns(t *testing.T) (a, b string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		if os.Getenv("COMMPROF_REQUIRE_DEPS") != "" {
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

// TestTwoHosts runs a 4-rank job over two network namespaces, two ranks
// on each, as torchrun would start it on two hosts: the ranks on the second
// host reach rank 0 and each other only across the veth link.
func TestTwoHosts(t *testing.T) {
	a, b := netns(t)
	master := fmt.Sprintf("10.77.%d.1", os.Getpid()%200)
	outs := runByHand(t, 4, func(r int) *exec.Cmd {
		ns := a
		if r >= 2 {
			ns = b
		}
		cmd := exec.Command("ip", "netns", "exec", ns, bin, "bench", "allreduce", "--min", "8", "--max", "4M", "--factor", "16", "--iters", "3", "--warmup", "1")
		cmd.Env = append(cleanEnv(), "RANK="+strconv.Itoa(r), "WORLD_SIZE=4", "MASTER_ADDR="+master, "MASTER_PORT=29500",
			"COMMPROF_JOIN_TIMEOUT=30s")
		return cmd
	})
	checkTable(t, outs[0].String(), 5) // 8·16^k ≤ 4M
}
