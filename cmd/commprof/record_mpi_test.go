package main

import (
	"os"
	"path/filepath"
	"testing"
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
