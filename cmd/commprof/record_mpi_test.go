package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/commprof/commprof/internal/envnames"
)

// TestLauncherFailure: a launcher that fails before any rank is recorded
// (Open MPI's mpirun run as root, a python3 without mpi4py) is named
// first, with its exit status, before the advice about MPI_Init; and a
// Python interpreter that cannot import mpi4py is named by its path.
func TestLauncherFailure(t *testing.T) {
	tools := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(tools, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A launcher that refuses, as Open MPI's does as root; one that runs
	// its program (mpiexec -np N PROG ..., as MPICH's, which is given no
	// options of commprof's); and a python3 without mpi4py.
	script("mpirun", "echo 'mpirun has detected an attempt to run as root.' >&2\nexit 1\n")
	script("mpiexec", "shift 2\nexec \"$@\"\n")
	python := script("python3", "echo 'Traceback (most recent call last):' >&2\necho \"ModuleNotFoundError: No module named 'mpi4py'\" >&2\nexit 1\n")
	lib := filepath.Join(tools, "libcommprof-pmpi.so")
	if err := os.WriteFile(lib, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + tools + ":/usr/bin:/bin", envnames.PMPILibrary + "=" + lib}
	prog := filepath.Join(t.TempDir(), "train.py")
	if err := os.WriteFile(prog, []byte("from mpi4py import MPI\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	firstLine := func(stderr string) string {
		i := strings.Index(stderr, "commprof: ")
		if i < 0 {
			return ""
		}
		line, _, _ := strings.Cut(stderr[i:], "\n")
		return line
	}

	dir := filepath.Join(t.TempDir(), "run")
	r := commprof(t, env, "record", "--mpi", "openmpi", "--out", dir, "--", "mpirun", "-np", "2", "/bin/true")
	if want := "commprof: mpirun failed (exit status 1) and no rank of it was recorded"; r.code != exitError || !strings.HasPrefix(firstLine(r.stderr), want) {
		t.Errorf("a refusing launcher: exit %d, want %d and a first line %q:\n%s", r.code, exitError, want, r.stderr)
	}
	if root := strings.Contains(r.stderr, "--allow-run-as-root"); root != (os.Geteuid() == 0) {
		t.Errorf("as uid %d, the advice about --allow-run-as-root is given: %v\n%s", os.Geteuid(), root, r.stderr)
	}
	if strings.Index(r.stderr, "calls MPI_Init") < strings.Index(r.stderr, "failed (exit status 1)") {
		t.Errorf("the advice comes before the launcher's failure:\n%s", r.stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("record left %s behind: %v", dir, err)
	}

	r = commprof(t, env, "record", "--mpi", "mpich", "--out", dir, "--", "mpiexec", "-np", "2", "python3", prog)
	if want := "commprof: mpiexec failed (exit status 1)"; r.code != exitError || !strings.HasPrefix(firstLine(r.stderr), want) {
		t.Errorf("python3 without mpi4py: exit %d, want a first line %q:\n%s", r.code, want, r.stderr)
	}
	if want := "interpreter " + python + " cannot import mpi4py (ModuleNotFoundError: No module named 'mpi4py')"; !strings.Contains(r.stderr, want) {
		t.Errorf("python3 without mpi4py: the message does not say %q:\n%s", want, r.stderr)
	}
}
