package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/commprof/commprof/bench"
	"github.com/commprof/commprof/internal/envnames"
)

// bin is the commprof binary the end-to-end tests run, built once.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "commprof-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = filepath.Join(dir, "commprof")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building commprof: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// commprof runs the binary with a time limit and a clean COMMPROF_ environment.
func commprof(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return commprofUnder(t, nil, env, args...)
}

// commprofUnder runs the binary as commprof does, under wrap (a command
// that runs another, such as taskset; none if empty).
func commprofUnder(t *testing.T, wrap []string, env []string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	argv := append(append(slices.Clone(wrap), bin), args...)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(cleanEnv(), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("commprof %v did not finish in 90s\nstderr:\n%s", args, e.String())
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{o.String(), e.String(), code}
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "COMMPROF_"), strings.HasPrefix(k, "OMPI_"), strings.HasPrefix(k, "PMI"),
			strings.HasPrefix(k, "SLURM_"), k == "RANK", k == "WORLD_SIZE", k == "MASTER_ADDR", k == "MASTER_PORT":
			continue
		}
		env = append(env, kv)
	}
	return env
}

// tableRows parses the rows of a bench table.
func tableRows(t *testing.T, out string) [][]string {
	t.Helper()
	var rows [][]string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 8 && f[0] != "size(B)" && !strings.HasPrefix(line, "#") {
			rows = append(rows, f)
		}
	}
	return rows
}

func TestBenchEveryCollective(t *testing.T) {
	for _, op := range []string{"allreduce", "broadcast", "reduce", "allgather", "reducescatter"} {
		t.Run(op, func(t *testing.T) {
			r := commprof(t, nil, "bench", op, "--ranks", "3", "--min", "4", "--max", "1M", "--factor", "16", "--iters", "3", "--warmup", "1")
			if r.code != 0 {
				t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			rows := tableRows(t, r.stdout)
			if len(rows) != 5 { // 4·16^k ≤ 1M: 4, 64, 1K, 16K, 256K
				t.Fatalf("got %d rows, want 5:\n%s", len(rows), r.stdout)
			}
			for _, row := range rows {
				if row[7] != "0" {
					t.Errorf("wrong results: %v", row)
				}
				if v, err := strconv.ParseFloat(row[6], 64); err != nil || v < 0 {
					t.Errorf("busbw %q", row[6])
				}
			}
		})
	}
}

// TestBenchNcclTestsFlags: nccl-tests' one-letter flags mean what they
// mean there, and the footer's average is the rows' mean busbw.
func TestBenchNcclTestsFlags(t *testing.T) {
	for _, check := range []string{"1", "0"} {
		r := commprof(t, nil, "bench", "allreduce", "--ranks", "2", "-b", "8", "-e", "1K", "-f", "2", "-n", "3", "-w", "1", "-c", check, "-d", "float64", "-o", "max")
		if r.code != 0 {
			t.Fatalf("-c %s: exit %d\n%s%s", check, r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, "2 ranks, float64, max, algo auto, 3 iters, 1 warm-up") {
			t.Errorf("-c %s: the header does not show -n 3 -w 1 -d float64 -o max:\n%s", check, r.stdout)
		}
		rows := tableRows(t, r.stdout)
		if len(rows) != 8 { // 8, 16, ..., 1024
			t.Fatalf("-c %s: %d rows, want 8:\n%s", check, len(rows), r.stdout)
		}
		var sum float64
		for _, row := range rows {
			bw, _ := strconv.ParseFloat(row[6], 64)
			sum += bw
			if want := map[string]string{"1": "0", "0": "N/A"}[check]; row[7] != want {
				t.Errorf("-c %s: #wrong %q, want %q", check, row[7], want)
			}
		}
		var avg float64
		i := strings.Index(r.stdout, "# Avg bus bandwidth    : ")
		if i < 0 {
			t.Fatalf("no footer:\n%s", r.stdout)
		}
		if _, err := fmt.Sscan(r.stdout[i+len("# Avg bus bandwidth    : "):], &avg); err != nil || math.Abs(avg-sum/8) > 0.0006+1e-3*avg {
			t.Errorf("-c %s: average bus bandwidth %v (%v), the rows' mean is %v", check, avg, err, sum/8)
		}
		want := map[string]string{"1": "# Out of bounds values : 0 OK", "0": "# Out of bounds values : N/A"}[check]
		if !strings.Contains(r.stdout, want) {
			t.Errorf("-c %s: want %q in\n%s", check, want, r.stdout)
		}
	}
	if r := commprof(t, nil, "bench", "allreduce", "-c", "2"); r.code != exitUsage || !strings.Contains(r.stderr, "--check 2") {
		t.Errorf("-c 2: exit %d, %q", r.code, r.stderr)
	}
}

// TestBenchHeaderNamesTransport: the table says how rank 0's sockets are
// driven, so that figures can be compared knowingly (and, over shared
// memory, TestAutoTransportInAJob).
func TestBenchHeaderNamesTransport(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{envnames.Transport + "=tcp"}, "# rank 0's links: 1 peer through TCP (congestion control reno, raw I/O "},
		{[]string{envnames.Transport + "=tcp", envnames.RawIO + "=off", envnames.TCPCongestion + "=reno"}, "# rank 0's links: 1 peer through TCP (congestion control reno, raw I/O off)\n"},
		{[]string{envnames.Transport + "=tcp", envnames.RawIO + "=on", envnames.TCPCongestion + "=system"}, "# rank 0's links: 1 peer through TCP (congestion control the host's default"},
	} {
		r := commprof(t, tc.env, "bench", "allreduce", "--ranks", "2", "--max", "8", "--iters", "2")
		if r.code != 0 || !strings.Contains(r.stdout, tc.want) {
			t.Errorf("%v: exit %d, want %q in\n%s%s", tc.env, r.code, tc.want, r.stdout, r.stderr)
		}
	}
}

func TestBenchJSONAndAlgorithms(t *testing.T) {
	for _, algo := range []string{"ring", "recursive_doubling", "rabenseifner", "tree"} {
		r := commprof(t, nil, "bench", "allreduce", "--ranks", "3", "--min", "1K", "--max", "256K", "--iters", "2", "--warmup", "0", "--algo", algo, "--json")
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s", algo, r.code, r.stderr)
		}
		var rows []bench.Result
		if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil {
			t.Fatalf("%s: not JSON: %v\n%s", algo, err, r.stdout)
		}
		if len(rows) != 5 {
			t.Fatalf("%s: %d rows, want 5 (1K..256K by 4)", algo, len(rows))
		}
		for _, row := range rows {
			if row.Algo != algo || row.Wrong != 0 || row.Ranks != 3 || row.TimeUS <= 0 {
				t.Errorf("%s: row %+v", algo, row)
			}
			want := float64(row.Bytes) / (row.TimeUS / 1e6) / 1e9 * 2 * 2 / 3
			if d := row.BusBW - want; d > 1e-9*want+1e-12 || d < -1e-9*want-1e-12 {
				t.Errorf("%s: busbw %v, want algbw·2(n-1)/n = %v", algo, row.BusBW, want)
			}
		}
	}
}

func TestBadInvocations(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "allscatter"}, `unknown collective "allscatter"`},
		{[]string{"bench", "allreduce", "--max", "12Q"}, "--max"},
		{[]string{"bench", "allreduce", "--algo", "chain"}, "allreduce has no chain algorithm"},
		{[]string{"bench", "allreduce", "--ranks", "0"}, "--ranks 0"},
		{[]string{"bench", "broadcast", "--ranks", "2", "--root", "5"}, "--root 5"},
		{[]string{"bench", "allreduce", "--iters", "0"}, "iterations"},
		{[]string{"bench", "allreduce", "--tune", "bogus=1"}, "--tune"},
		{[]string{"bench", "allreduce", "--frobnicate"}, "unknown flag"},
		{[]string{"bench"}, "takes 1 argument"},
	} {
		r := commprof(t, nil, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, r.code, r.stderr, exitUsage, tc.want)
		}
		// The hint names the subcommand's help, not the root's.
		if !strings.Contains(r.stderr, "Run 'commprof bench --help' for usage.") {
			t.Errorf("%v: the usage hint does not name bench's help: %q", tc.args, r.stderr)
		}
	}
	r := commprof(t, []string{"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_LOCAL_SIZE=2"}, "bench", "allreduce")
	if r.code != exitError || !strings.Contains(r.stderr, "nothing says where rank 0 is") {
		t.Errorf("multi-host mpirun without a coordinator: exit %d, %q", r.code, r.stderr)
	}
}

// TestProgramFlagsBeforeDash: a program's flags given before -- are
// answered with the command line that works.
func TestProgramFlagsBeforeDash(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"record", "train", "--epochs", "1"}, "The program's own flags go after --: commprof record -- train --epochs 1\n"},
		{[]string{"record", "--ranks", "2", "-o", "x", "--force", "train", "--lr=0.1"}, "commprof record --ranks 2 -o x --force -- train --lr=0.1\n"},
		{[]string{"sweep", "--out", "x", "train", "--epochs", "1"}, "commprof sweep --out x -- train --epochs 1\n"},
		{[]string{"record", "--ranks", "2", "--bogus"}, ""},
		{[]string{"bench", "allreduce", "--epochs", "1"}, ""},
	} {
		r := commprof(t, nil, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, "unknown flag") {
			t.Errorf("%v: exit %d, %q", tc.args, r.code, r.stderr)
		}
		if got := strings.Contains(r.stderr, "after --"); got != (tc.want != "") || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: %q, want the hint %q", tc.args, r.stderr, tc.want)
		}
	}
}

func TestVersion(t *testing.T) {
	r := commprof(t, nil, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "commprof ") {
		t.Fatalf("version: %d %q", r.code, r.stdout)
	}
	r = commprof(t, nil, "completion", "bash")
	if r.code != 0 || !strings.Contains(r.stdout, "commprof") {
		t.Fatalf("completion: %d", r.code)
	}
}

// startLong starts a 4-rank benchmark that runs until stopped, and waits
// until its ranks are up. It returns the launcher and the ranks' pids.
func startLong(t *testing.T, env []string) (*exec.Cmd, *bytes.Buffer, map[int]int) {
	t.Helper()
	return startJob(t, env, "bench", "allreduce", "--ranks", "4", "--min", "4M", "--max", "4M", "--iters", "1000000")
}

// startJob starts commprof with args, a job of 4 local ranks, and waits
// until rank 0 has printed its header, which it does once every rank has
// joined. It returns the launcher, its standard error (to read once it has
// exited) and the ranks' pids.
func startJob(t *testing.T, env []string, args ...string) (*exec.Cmd, *bytes.Buffer, map[int]int) {
	t.Helper()
	cmd, br, stderr := startCommprof(t, env, args...)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "# commprof bench") {
		t.Fatalf("no header from rank 0: %q %v", line, err)
	}
	go func() { _, _ = br.WriteTo(io.Discard) }()
	return cmd, stderr, rankPIDs(t, cmd.Process.Pid, 4)
}

// startCommprof starts the binary with a clean environment plus env, to be
// killed when the test ends. It returns its standard output to read and
// its standard error (to read once it has exited).
func startCommprof(t *testing.T, env []string, args ...string) (*exec.Cmd, *bufio.Reader, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(cleanEnv(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return cmd, bufio.NewReader(stdout), &stderr
}

// waitStopped waits until process pid is stopped (state T in
// /proc/PID/task/*/stat), as it is once it has taken a SIGSTOP.
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	// Every thread: /proc/PID/stat is the main thread's alone, and a
	// thread that has not yet taken the stop (runnable, on a busy
	// machine) could still take a signal that came after it.
	stopped := func() (bool, error) {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return false, err
		}
		for _, task := range tasks {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
			if err != nil {
				continue // the thread is gone
			}
			if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) == 0 || (f[0] != "T" && f[0] != "t") {
				return false, nil
			}
		}
		return len(tasks) > 0, nil
	}
	for end := time.Now().Add(10 * time.Second); ; {
		ok, err := stopped()
		if err != nil {
			t.Fatalf("process %d: %v", pid, err)
		}
		if ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("process %d did not stop in 10s", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// rankPIDs finds the children of the launcher and their ranks.
func rankPIDs(t *testing.T, parent, n int) map[int]int {
	t.Helper()
	pids := map[int]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(parent) {
			continue
		}
		env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte(envnames.Rank+"=")); ok {
				r, _ := strconv.Atoi(string(v))
				pids[r] = pid
			}
		}
	}
	if len(pids) != n {
		t.Fatalf("found ranks %v under launcher %d, want %d", pids, parent, n)
	}
	return pids
}

func waitExit(t *testing.T, cmd *exec.Cmd, limit time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		return code, time.Since(start)
	case <-time.After(limit):
		t.Fatalf("the job did not stop within %v", limit)
	}
	return 0, 0
}

// transports are the ways ranks on this machine can be linked, for the
// tests of failures: TCP with each raw I/O mode, whatever this machine's
// cores would choose, and shared memory.
var transports = []struct {
	name string
	env  []string
}{
	{"tcp/raw_io=off", []string{envnames.Transport + "=tcp", envnames.RawIO + "=off"}},
	{"tcp/raw_io=large", []string{envnames.Transport + "=tcp", envnames.RawIO + "=large"}},
	{"tcp/raw_io=on", []string{envnames.Transport + "=tcp", envnames.RawIO + "=on"}},
	{"shm", []string{envnames.Transport + "=shm"}},
}

// TestKilledRankStopsTheJob kills rank 2 mid-collective: the other ranks
// must report rank 2 and the launcher must exit non-zero naming it. The
// peer timeout is 5 s: each rank must name rank 2 for its death (the
// kernel closes its connections, and sockets, at once), not for its
// silence, which they would report only after the timeout.
func TestKilledRankStopsTheJob(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { killedRankStopsTheJob(t, tr.env) })
	}
}

func killedRankStopsTheJob(t *testing.T, env []string) {
	cmd, stderr, pids := startLong(t, append([]string{envnames.PeerTimeout + "=5s"}, env...))
	if err := syscall.Kill(pids[2], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// A limit for a hang only: the outcome below says whether the ranks
	// saw the death or waited out the timeout.
	code, took := waitExit(t, cmd, 60*time.Second)
	out := stderr.String()
	if code == 0 {
		t.Fatalf("exit 0 after a rank was killed\n%s", out)
	}
	if !strings.Contains(out, "commprof: rank 2 was killed by signal 9") {
		t.Errorf("the launcher did not name rank 2:\n%s", out)
	}
	for _, r := range []int{0, 1, 3} {
		prefix := fmt.Sprintf("[rank %d] commprof: rank %d: ", r, r)
		var report string
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, prefix) && strings.Contains(line, "rank 2 failed") {
				report = line
			}
		}
		switch {
		case report == "":
			t.Errorf("rank %d did not report rank 2's failure:\n%s", r, out)
		case strings.Contains(report, "no data or heartbeat"):
			t.Errorf("rank %d took rank 2's death for a silence, after the peer timeout: %s", r, report)
		}
	}
	t.Logf("stopped %v after the kill:\n%s", took, out)
}

// TestStoppedRankTimesOut freezes rank 1 (SIGSTOP): with no data and no
// heartbeats the others must give up on it after COMMPROF_PEER_TIMEOUT.
// Over TCP the two extreme raw I/O modes are run (the reads, which notice
// the silence, are the same in large as in on); over shared memory it is
// the heartbeat in the segment that stops.
func TestStoppedRankTimesOut(t *testing.T) {
	for _, tr := range transports {
		if strings.HasSuffix(tr.name, "large") {
			continue
		}
		t.Run(tr.name, func(t *testing.T) { stoppedRankTimesOut(t, tr.env) })
	}
}

func stoppedRankTimesOut(t *testing.T, env []string) {
	cmd, stderr, pids := startLong(t, append([]string{envnames.PeerTimeout + "=2s"}, env...))
	if err := syscall.Kill(pids[1], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	code, _ := waitExit(t, cmd, 30*time.Second)
	out := stderr.String()
	if code == 0 || !strings.Contains(out, "rank 1 failed: no data or heartbeat for 2s") {
		t.Fatalf("exit %d; want the others to time out on rank 1:\n%s", code, out)
	}
}

// shmSegments counts the shared-memory segments process pid maps, and
// returns how they are named.
func shmSegments(t *testing.T, pid int) (int, []string) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || !strings.Contains(line, "commprof-shm") {
			continue
		}
		name := strings.Join(f[5:], " ")
		if !seen[f[4]] { // one segment per inode
			seen[f[4]] = true
			names = append(names, name)
		}
	}
	return len(names), names
}

// TestShmLeavesNothingBehind: a 4-rank job on one machine maps a segment
// per pair of ranks, each an anonymous memfd with no name in /dev/shm or
// anywhere else; after a rank is SIGKILLed and the job stops, no
// segment is left: nothing new in /dev/shm, and no process maps one.
func TestShmLeavesNothingBehind(t *testing.T) {
	before, _ := os.ReadDir("/dev/shm")
	cmd, _, pids := startLong(t, []string{envnames.Transport + "=shm"})
	for r, pid := range pids {
		n, names := shmSegments(t, pid)
		if n != 3 {
			t.Errorf("rank %d maps %d segments, want 3 (one per peer): %v", r, n, names)
		}
		for _, name := range names {
			if name != "/memfd:commprof-shm (deleted)" {
				t.Errorf("rank %d maps a segment named %q, want an anonymous memfd", r, name)
			}
		}
	}
	if err := syscall.Kill(pids[2], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code, _ := waitExit(t, cmd, 20*time.Second); code == 0 {
		t.Fatal("exit 0 after a rank was killed")
	}
	after, _ := os.ReadDir("/dev/shm")
	if len(after) > len(before) {
		var names []string
		for _, e := range after {
			names = append(names, e.Name())
		}
		t.Errorf("/dev/shm holds %d entries after the job, %d before: %v", len(after), len(before), names)
	}
	for r, pid := range pids {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			if n, _ := shmSegments(t, pid); n > 0 {
				t.Errorf("rank %d (pid %d) still maps %d segments after the job stopped", r, pid, n)
			}
		}
	}
}

// TestInterrupt sends SIGINT to the launcher, as Ctrl-C does.
func TestInterrupt(t *testing.T) {
	cmd, stderr, pids := startLong(t, nil)
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	code, _ := waitExit(t, cmd, 20*time.Second)
	if code != exitInterrupted {
		t.Errorf("exit %d after SIGINT, want %d\n%s", code, exitInterrupted, stderr.String())
	}
	for r, pid := range pids {
		if syscall.Kill(pid, 0) == nil {
			if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); !bytes.Contains(st, []byte(") Z")) {
				t.Errorf("rank %d (pid %d) still running after the launcher exited", r, pid)
			}
		}
	}
}

// TestKilledLauncherStopsItsRanks: a launcher killed with SIGKILL, which
// cannot stop its ranks itself, leaves none running: the kernel sends each
// SIGTERM (Linux).
func TestKilledLauncherStopsItsRanks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux's")
	}
	cmd, stderr, pids := startLong(t, nil)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for r, pid := range pids {
		for {
			st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if err != nil || bytes.Contains(st, []byte(") Z")) {
				break // gone, or a zombie waiting for its new parent
			}
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("rank %d (pid %d) still running 15s after its launcher was killed\n%s", r, pid, stderr)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestExternalLaunchers starts the ranks by hand with each launcher's
// variables, as torchrun, Slurm and MPICH would.
func TestExternalLaunchers(t *testing.T) {
	dir := t.TempDir()
	port := strconv.Itoa(freePort(t))
	for _, tc := range []struct {
		name string
		env  func(rank int) []string
	}{
		{"torchrun", func(r int) []string {
			return []string{"RANK=" + strconv.Itoa(r), "WORLD_SIZE=3", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port}
		}},
		{"slurm", func(r int) []string {
			return []string{"SLURM_PROCID=" + strconv.Itoa(r), "SLURM_NTASKS=3", "SLURM_JOB_ID=42", envnames.RendezvousDir + "=" + dir}
		}},
		{"pmi", func(r int) []string {
			return []string{"PMI_RANK=" + strconv.Itoa(r), "PMI_SIZE=3", envnames.Coord + "=127.0.0.1:" + port}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			outs := runByHand(t, 3, func(r int) *exec.Cmd {
				cmd := exec.Command(bin, "bench", "allreduce", "--min", "1K", "--max", "1M", "--iters", "2", "--warmup", "0")
				cmd.Env = append(cleanEnv(), tc.env(r)...)
				return cmd
			})
			checkTable(t, outs[0].String(), 6) // 1K·4^k ≤ 1M
			if outs[1].Len() != 0 {
				t.Errorf("rank 1 printed: %s", outs[1])
			}
		})
	}
}

// runByHand starts n ranks as an external launcher would, with the
// commands cmdFor makes, and waits for all of them to succeed. It returns
// each rank's output (stdout and stderr together).
func runByHand(t *testing.T, n int, cmdFor func(rank int) *exec.Cmd) []*bytes.Buffer {
	t.Helper()
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	for r := range n {
		cmd := cmdFor(r)
		outs[r] = &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[r], outs[r]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[r] = cmd
		t.Cleanup(func() { _ = cmd.Process.Kill() })
	}
	for r, cmd := range cmds {
		if code, _ := waitExit(t, cmd, 60*time.Second); code != 0 {
			t.Fatalf("rank %d exit %d:\n%s", r, code, outs[r])
		}
	}
	return outs
}

// checkTable checks that a bench table has rows rows, every one with no
// wrong result.
func checkTable(t *testing.T, out string, rows int) {
	t.Helper()
	got := tableRows(t, out)
	if len(got) != rows {
		t.Fatalf("%d table rows, want %d:\n%s", len(got), rows, out)
	}
	for _, row := range got {
		if row[7] != "0" {
			t.Errorf("wrong results: %v", row)
		}
	}
}

// TestUnderMpirun runs the benchmark under Debian's Open MPI launcher.
func TestUnderMpirun(t *testing.T) {
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		if os.Getenv(envnames.RequireDeps) != "" {
			t.Fatal("mpirun not found; `make test` installs openmpi-bin")
		}
		t.Skip("mpirun not installed")
	}
	for _, extra := range [][]string{nil, {"-x", envnames.Coord + "=127.0.0.1:" + strconv.Itoa(freePort(t))}} {
		args := append([]string{"--allow-run-as-root", "--oversubscribe", "-np", "4"}, extra...)
		args = append(args, bin, "bench", "allreduce", "--min", "8", "--max", "4M", "--iters", "3", "--warmup", "1", "--json")
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		cmd := exec.CommandContext(ctx, mpirun, args...)
		cmd.Env = cleanEnv()
		var e bytes.Buffer
		cmd.Stderr = &e
		out, err := cmd.Output()
		cancel()
		if err != nil {
			t.Fatalf("mpirun %v: %v\n%s", extra, err, e.String())
		}
		var rows []bench.Result
		if err := json.Unmarshal(out, &rows); err != nil {
			t.Fatalf("mpirun %v: output is not the JSON of one rank: %v\n%s", extra, err, out)
		}
		if len(rows) != 10 || rows[0].Ranks != 4 {
			t.Fatalf("mpirun %v: %d rows on %d ranks", extra, len(rows), rows[0].Ranks)
		}
		for _, r := range rows {
			if r.Wrong != 0 {
				t.Errorf("mpirun %v: wrong results %+v", extra, r)
			}
		}
	}
}
