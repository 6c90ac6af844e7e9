package pmpi

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/trace"
)

// TestHPCC records Debian's HPC Challenge (hpcc, linked with Open MPI)
// end to end, with a problem small enough to take a second: every rank
// complete, its communicators (HPL's process grid) named alike on every
// rank, every message received as sent, and the barriers agreeing on
// the clocks.
func TestHPCC(t *testing.T) {
	findMPI(t, OpenMPI)
	hpcc, err := exec.LookPath("hpcc")
	if err != nil {
		need(t, "Debian's hpcc is not installed")
	}
	bin := commprofBin(t)
	library(t, findMPI(t, OpenMPI))
	cwd := t.TempDir()
	inf, err := os.ReadFile("testdata/hpccinf.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cwd, "hpccinf.txt"), inf, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cwd, "run")
	res := command(t, nil, cwd, bin, "record", "--out", dir, "--", "mpirun", "--allow-run-as-root", "--oversubscribe",
		"-np", "2", hpcc)
	if res.err != nil {
		t.Fatalf("record: %v\n%s%s", res.err, res.stdout, res.stderr)
	}
	out, err := os.ReadFile(filepath.Join(cwd, "hpccoutf.txt"))
	if err != nil || !bytes.Contains(out, []byte("Success=1")) {
		t.Fatalf("hpcc did not succeed: %v\n%s", err, out)
	}
	run := readRun(t, dir)
	if len(run.Ranks) != 2 || len(run.Problems) != 0 || run.Manifest.Status != trace.StatusComplete {
		t.Fatalf("%d ranks, problems %v, status %s", len(run.Ranks), run.Problems, run.Manifest.Status)
	}
	counts := map[string]int{}
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			counts[e.Kind.String()+" "+e.Name]++
		}
	}
	// HPL broadcasts panels and swaps rows point to point, PTRANS and
	// FFT exchange with alltoall, b_eff rings with sendrecv, and every
	// part is fenced with barriers.
	for _, k := range []string{"collective allreduce", "collective broadcast", "collective barrier", "collective alltoall",
		"collective comm_split", "send sendrecv", "recv sendrecv", "wait sendrecv"} {
		if counts[k] == 0 {
			t.Errorf("no %s events (%v)", k, counts)
		}
	}
	if run.Manifest.Config["comm world/split0:0"] == "" {
		t.Errorf("HPL's process grid is not among the communicators: %v", run.Manifest.Config)
	}
	checkSpans(t, run)
	checkConservation(t, run)
	checkReplayed(t, bin, dir)
}

// TestMPI4pyBench records mpi4py's own benchmark, `python3 -m mpi4py.bench
// ringtest`, and replays it as one program.
func TestMPI4pyBench(t *testing.T) {
	m := findMPI(t, OpenMPI)
	py := python(t)
	library(t, m)
	bin := commprofBin(t)
	dir := filepath.Join(t.TempDir(), "ring")
	res := command(t, nil, "", bin, "record", "--out", dir, "--", m.run, "--allow-run-as-root", "--oversubscribe", "-np", "4",
		py, "-m", "mpi4py.bench", "ringtest", "-n", "2000", "-l", "20")
	if res.err != nil {
		t.Fatalf("record: %v\n%s%s", res.err, res.stdout, res.stderr)
	}
	checkReplayed(t, bin, dir)
}

// TestKilledRank kills a rank with SIGKILL while it records: its stream
// keeps every batch it flushed, readable, and record fails saying which
// streams were cut.
func TestKilledRank(t *testing.T) {
	m := findMPI(t, OpenMPI)
	py := python(t)
	library(t, m)
	bin := commprofBin(t)
	dir := filepath.Join(t.TempDir(), "run")
	script, _ := filepath.Abs("testdata/loop.py")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, bin, "record", "--out", dir, "--", "mpirun", "--allow-run-as-root", "--oversubscribe",
		"-np", "3", py, script)
	c.Env = cleanEnv(envnames.Flush + "=50ms")
	var stderr bytes.Buffer
	c.Stdout, c.Stderr = &stderr, &stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	// Rank 1's stream, read as it grows, until it holds 2000 events.
	path := filepath.Join(dir, trace.RankFile(1))
	var seen int
	var pid int
	deadline := time.Now().Add(60 * time.Second)
	for seen < 2000 {
		if time.Now().After(deadline) {
			t.Fatalf("rank 1 flushed %d events in 60s\n%s", seen, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
		info, evs, err := trace.ReadFile(path)
		if err != nil && !errors.Is(err, trace.ErrTruncated) {
			continue // not there yet
		}
		seen, pid = len(evs), info.PID
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := c.Wait()
	if ctx.Err() != nil {
		t.Fatalf("record did not end after the kill\n%s", stderr.String())
	}
	if err == nil {
		t.Fatalf("record exited 0 after a rank was killed\n%s", stderr.String())
	}
	run := readRun(t, dir)
	for _, rk := range run.Ranks {
		if len(rk.Events) == 0 || rk.Truncated == nil {
			t.Errorf("rank %d: %d events, cut: %v", rk.Info.Rank, len(rk.Events), rk.Truncated)
		}
	}
	if got := len(run.Ranks[1].Events); got < seen {
		t.Errorf("rank 1: %d events after the kill, %d were readable before it", got, seen)
	}
	if run.Manifest.Status != trace.StatusFailed || !strings.Contains(run.Manifest.Error, "rank 1's stream was cut") {
		t.Errorf("manifest: %s: %s", run.Manifest.Status, run.Manifest.Error)
	}
}

// TestNotRecorded: a launcher whose program never calls MPI_Init records
// nothing, and record fails saying what to check, leaving no run behind.
func TestNotRecorded(t *testing.T) {
	for _, m := range []mpiTools{findMPI(t, OpenMPI), findMPI(t, MPICH)} {
		t.Run(string(m.flavor), func(t *testing.T) {
			library(t, m)
			bin := commprofBin(t)
			dir := filepath.Join(t.TempDir(), "run")
			args := append(append([]string{"record", "--out", dir, "--", m.run}, m.args...), "-np", "2", "/bin/true")
			res := command(t, nil, "", bin, args...)
			var ee *exec.ExitError
			if !errors.As(res.err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("record: %v, want exit status 1\n%s", res.err, res.stderr)
			}
			for _, s := range []string{"no rank of it was recorded", "calls MPI_Init", LibraryFile(m.flavor), "dynamically linked"} {
				if !strings.Contains(res.stderr, s) {
					t.Errorf("the message does not say %q:\n%s", s, res.stderr)
				}
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("record left %s behind: %v", dir, err)
			}
		})
	}
}

// TestMeasuredClocks measures every rank's clock with ping-pongs
// (COMMPROF_CLOCK=measure) although all share one: the true offset is 0,
// so every measured offset must lie within its stated uncertainty.
func TestMeasuredClocks(t *testing.T) {
	m := findMPI(t, OpenMPI)
	prog := cProgram(t, m, "unfinished")
	dir, res := recordDirect(t, m, 3, []string{envnames.Clock + "=measure"}, "-x", envnames.Clock, prog, "20")
	// The program exits without MPI_Finalize; Open MPI's mpirun says so.
	if _, err := os.Stat(filepath.Join(dir, "run.json")); err != nil {
		t.Fatalf("no run.json: %v\n%s", err, res.stderr)
	}
	man, err := trace.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if man.Clock.Method != "ping-pong" || man.Clock.UncertaintyNS <= 0 || len(man.Ranks) != 3 {
		t.Fatalf("clock %+v, %d ranks", man.Clock, len(man.Ranks))
	}
	for _, r := range man.Ranks[1:] {
		if r.ClockUncertaintyNS <= 0 || math.Abs(float64(r.ClockOffsetNS)) > float64(r.ClockUncertaintyNS) {
			t.Errorf("rank %d: offset %d ns, uncertainty %d ns", r.Rank, r.ClockOffsetNS, r.ClockUncertaintyNS)
		}
		if r.ClockUncertaintyNS > man.Clock.UncertaintyNS {
			t.Errorf("rank %d's uncertainty %d is above the run's %d", r.Rank, r.ClockUncertaintyNS, man.Clock.UncertaintyNS)
		}
	}
	for _, rk := range readRun(t, dir).Ranks {
		if want := man.Ranks[rk.Info.Rank].ClockOffsetNS; rk.Info.ClockOffsetNS != want {
			t.Errorf("rank %d: the stream says offset %d, run.json %d", rk.Info.Rank, rk.Info.ClockOffsetNS, want)
		}
	}
}

// TestWrongMPI records an Open MPI program (mpi4py) with the library built
// for MPICH: the program cannot run with both, and the rank says why
// instead of failing inside MPI.
func TestWrongMPI(t *testing.T) {
	m := findMPI(t, OpenMPI)
	library(t, findMPI(t, MPICH))
	py := python(t)
	bin := commprofBin(t)
	dir := filepath.Join(t.TempDir(), "run")
	res := command(t, nil, "", bin, "record", "--mpi", "mpich", "--out", dir, "--", m.run, "--allow-run-as-root",
		"--oversubscribe", "-np", "2", py, "-c", "from mpi4py import MPI")
	if res.err == nil || !strings.Contains(res.stderr, "two MPI libraries are loaded") ||
		!strings.Contains(res.stderr, "no rank of it was recorded") {
		t.Fatalf("record: %v\n%s", res.err, res.stderr)
	}
}

// TestRankWithoutLibrary: one rank of three does not record (here its
// COMMPROF_TRACE_DIR is unset, as when a job script forgets to pass it to
// another host). The others must not wait for it forever: after
// COMMPROF_JOIN_TIMEOUT they run on unrecorded and say why.
func TestRankWithoutLibrary(t *testing.T) {
	m := findMPI(t, OpenMPI)
	prog := cProgram(t, m, "unfinished")
	dir := filepath.Join(t.TempDir(), "run")
	env := []string{envnames.JoinTimeout + "=2s", "LD_PRELOAD=" + library(t, m), envnames.TraceDir + "=" + dir}
	res := launch(t, m, 3, env, "", "-x", "LD_PRELOAD", "-x", envnames.TraceDir, "-x", envnames.JoinTimeout, "sh", "-c",
		`[ "$OMPI_COMM_WORLD_RANK" = 1 ] && unset COMMPROF_TRACE_DIR; exec "$0" 5`, prog)
	if !strings.Contains(res.stderr, "rank 0: not every rank joined the recording within 2s") {
		t.Fatalf("%v\n%s", res.err, res.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, trace.RankFile(0))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rank 0 recorded alone: %v", err)
	}
}
