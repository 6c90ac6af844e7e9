package driver

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/interpose/pmpi"
)

func TestMPIName(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "solver.x")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "train.py")
	if err := os.WriteFile(script, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mpirun", "-np", "4", prog}, "mpi-solver"},
		{[]string{"mpirun", "--hostfile", "hosts", "-x", "FOO", "-np", "2", "/bin/sh", script, "--epochs", "1"}, "mpi-train"},
		{[]string{"mpiexec", "-n", "2", "sh", "-c", "true"}, "mpi-sh"},
		{[]string{"mpirun", "-np", "2", "commprof", "bench", "allreduce"}, ""}, // commprof's own ranks
		{[]string{"train", "--epochs", "1"}, ""},
		{[]string{"mpirun", "-np", "2", "no-such-program-here"}, ""},
	} {
		if got := mpiName(tc.args); got != tc.want {
			t.Errorf("mpiName(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestDefaultName(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "allreduce", "--max", "1M"}, "bench-allreduce"},
		{[]string{"train", "--epochs", "1"}, "train"},
		{[]string{"mpirun", "-np", "4", "commprof", "bench", "broadcast"}, "bench-broadcast"},
		{[]string{"srun", "-n", "16", "/usr/local/bin/commprof", "train", "--epochs", "3"}, "train"},
		{[]string{"./my job.sh", "x"}, "my-job.sh-x"},
	} {
		if got := defaultName(tc.args); got != tc.want {
			t.Errorf("defaultName(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// Under Open MPI's or MPICH's mpirun, record has the launcher pass the
// job's variables, its secret among them, on to the ranks of every host:
// by name, so that the secret's value never shows on a command line.
func TestPassOnToTheRanks(t *testing.T) {
	args := []string{"mpirun", "-H", "a,b", "-np", "4", "commprof", "train"}
	names := []string{envnames.TraceDir, envnames.Secret}
	none := func(string) string { return "" }
	for _, tc := range []struct {
		flavor  pmpi.Flavor
		getenv  func(string) string
		argv    []string
		envWant []string
	}{
		{pmpi.OpenMPI, none, []string{"mpirun", "-x", envnames.TraceDir, "-x", envnames.Secret, "-H", "a,b", "-np", "4", "commprof", "train"}, nil},
		{pmpi.MPICH, none, []string{"mpirun", "-genvlist", envnames.TraceDir + ",COMMPROF_SECRET", "-H", "a,b", "-np", "4", "commprof", "train"}, nil},
		{pmpi.OpenMPI, func(k string) string {
			if k == "OMPI_MCA_mca_base_env_list" {
				return "MINE"
			}
			return ""
		}, args, []string{"OMPI_MCA_mca_base_env_list=MINE;COMMPROF_TRACE_DIR;COMMPROF_SECRET"}},
	} {
		argv, env := passOn(args, tc.flavor, names, tc.getenv)
		if !slices.Equal(argv, tc.argv) || !slices.Equal(env, tc.envWant) {
			t.Errorf("%s: %q %q\nwant %q %q", tc.flavor, argv, env, tc.argv, tc.envWant)
		}
	}
}

// A job that is stopped leaves nothing running: here the "launcher" is a
// shell that exits on SIGINT at once, and its "rank" ignores SIGINT and
// SIGTERM, as an MPI rank spinning in a call does; the rank must not be
// left behind, parentless.
func TestStopLauncherLeavesNoRank(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "rank.pid")
	c := exec.Command("sh", "-c", `sh -c 'trap "" INT TERM; echo $$ > `+pidFile+`; while :; do sleep 0.1; done' & wait`)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	var rank int
	for i := 0; i < 100 && rank == 0; i++ {
		b, _ := os.ReadFile(pidFile)
		rank, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		time.Sleep(50 * time.Millisecond)
	}
	if rank == 0 {
		t.Fatal("the rank did not start")
	}
	_ = stopLauncher(c, done)
	gone := false
	for i := 0; i < 100 && !gone; i++ {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(rank) + "/stat")
		st := string(b)
		gone = err != nil || strings.Contains(st[strings.LastIndexByte(st, ')')+1:], " Z ")
		time.Sleep(50 * time.Millisecond)
	}
	if !gone {
		_ = syscall.Kill(rank, syscall.SIGKILL)
		t.Fatalf("rank %d still runs after its job was stopped", rank)
	}
}

// Under mpirun, a Python script that imports torch is a PyTorch job; one
// that does not (mpi4py) is an MPI program, with the stall watch.
func TestScriptUsesTorch(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mpi := write("mpi.py", "from mpi4py import MPI\n# import torch would be nice\nMPI.COMM_WORLD.Barrier()\n")
	tor := write("ddp.py", "import os, sys\nimport torch.distributed as dist\n")
	tor2 := write("ddp2.py", "import os, torch\n")
	tor3 := write("ddp3.py", "def main():\n    from torch import nn\n")
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"mpirun", "-np", "4", "python3", mpi}, false},
		{[]string{"mpirun", "-np", "4", "/usr/bin/python3", "-u", "-X", "dev", mpi}, false}, // the interpreter's options skipped
		{[]string{"mpirun", "-np", "2", "python3", tor}, true},
		{[]string{"mpirun", "-np", "2", "python3", tor2, "--epochs", "1"}, true},
		{[]string{"mpirun", "-np", "2", "python3", tor3}, true},
		{[]string{"mpirun", "-np", "2", "python3", "-m", "trainpkg"}, true},
		{[]string{"mpirun", "-np", "2", "./a.out"}, false},
	} {
		if got := torchUnderMPI(tc.args); got != tc.want {
			t.Errorf("torchUnderMPI(%q) = %v, want %v", tc.args, got, tc.want)
		}
	}
}
