package driver

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

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
