package pmpi

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/trace"
)

// The tests build the libraries, commprof and the C test programs once,
// into a directory of their own, and run real programs under real
// launchers. A missing MPI (or Python, or node) skips the tests that need
// it, unless COMMPROF_REQUIRE_DEPS is set, as `make test` does.

var work string // the tests' build directory

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "commprof-pmpi")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	work = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// need skips t (or fails it, under COMMPROF_REQUIRE_DEPS) for want of what.
func need(t testing.TB, what string) {
	t.Helper()
	if os.Getenv(envnames.RequireDeps) != "" {
		t.Fatalf("%s; `make test` installs it", what)
	}
	t.Skip(what)
}

// mpiTools are an MPI's compiler wrapper and launcher.
type mpiTools struct {
	flavor  Flavor
	cc, run string
	args    []string // the launcher's options every run needs
}

func findMPI(t testing.TB, f Flavor) mpiTools {
	t.Helper()
	look := func(names ...string) string {
		for _, n := range names {
			if p, err := exec.LookPath(n); err == nil {
				return p
			}
		}
		return ""
	}
	var m mpiTools
	switch f {
	case OpenMPI:
		m = mpiTools{flavor: f, cc: look("mpicc.openmpi"), run: look("mpirun.openmpi"),
			args: []string{"--allow-run-as-root", "--oversubscribe"}}
	case MPICH:
		m = mpiTools{flavor: f, cc: look("mpicc.mpich"), run: look("mpirun.mpich")}
	}
	if m.cc == "" || m.run == "" {
		need(t, fmt.Sprintf("%s's mpicc and mpirun are not installed", f))
	}
	return m
}

// once builds each artifact once for all tests.
var once struct {
	sync.Mutex
	done map[string]error
}

func build(t testing.TB, out string, f func() error) string {
	t.Helper()
	once.Lock()
	defer once.Unlock()
	if once.done == nil {
		once.done = map[string]error{}
	}
	err, ok := once.done[out]
	if !ok {
		err = f()
		once.done[out] = err
	}
	if err != nil {
		t.Fatalf("building %s: %v", filepath.Base(out), err)
	}
	return out
}

func run(dir string, name string, args ...string) error {
	c := exec.Command(name, args...)
	c.Dir = dir
	out, err := c.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// library builds the PMPI library for m's MPI, beside the test commprof
// binary, with the Makefile's flags (and warnings as errors).
func library(t testing.TB, m mpiTools) string {
	out := filepath.Join(work, LibraryFile(m.flavor))
	return build(t, out, func() error {
		srcs, _ := filepath.Glob("c/*.c")
		args := append([]string{"-O2", "-g", "-fPIC", "-shared", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror",
			"-o", out}, srcs...)
		return run(".", m.cc, append(args, "-lzstd", "-lpthread", "-ldl")...)
	})
}

// commprofBin builds commprof where record finds the libraries beside it.
func commprofBin(t testing.TB) string {
	out := filepath.Join(work, "commprof")
	return build(t, out, func() error { return run("../../cmd/commprof", "go", "build", "-o", out, ".") })
}

// cProgram builds testdata/name.c with m's compiler wrapper.
func cProgram(t testing.TB, m mpiTools, name string) string {
	out := filepath.Join(work, name+"-"+string(m.flavor))
	return build(t, out, func() error {
		return run(".", m.cc, "-O2", "-Wall", "-o", out, filepath.Join("testdata", name+".c"), "-lpthread")
	})
}

// python returns Debian's python3 with mpi4py and numpy.
func python(t testing.TB) string {
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import mpi4py, numpy").Run(); err != nil {
		need(t, "Debian's python3-mpi4py and python3-numpy are not installed")
	}
	return py
}

// cleanEnv is the test's environment without what would make a program
// think it is a rank already or record already.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "COMMPROF_"), strings.HasPrefix(k, "OMPI_"), strings.HasPrefix(k, "PMI"),
			strings.HasPrefix(k, "PMIX"), strings.HasPrefix(k, "SLURM_"), k == "LD_PRELOAD":
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

type result struct {
	stdout, stderr string
	err            error
}

// launch runs the launcher of m on np ranks of argv, with env added.
func launch(t testing.TB, m mpiTools, np int, env []string, dir string, argv ...string) result {
	t.Helper()
	args := append(append([]string{}, m.args...), "-np", fmt.Sprint(np))
	return command(t, env, dir, m.run, append(args, argv...)...)
}

func command(t testing.TB, env []string, dir string, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, name, args...)
	c.Env = cleanEnv(env...)
	c.Dir = dir
	var o, e bytes.Buffer
	c.Stdout, c.Stderr = &o, &e
	err := c.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %v did not finish in 120s\n%s%s", name, args, o.String(), e.String())
	}
	return result{o.String(), e.String(), err}
}

// recordDirect runs argv on np ranks of m with the library preloaded by
// hand, as a job script would, recording into a new directory.
func recordDirect(t testing.TB, m mpiTools, np int, env []string, argv ...string) (string, result) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	env = append(env, "LD_PRELOAD="+library(t, m), envnames.TraceDir+"="+dir)
	if m.flavor == OpenMPI {
		argv = append([]string{"-x", "LD_PRELOAD", "-x", envnames.TraceDir}, argv...)
	}
	return dir, launch(t, m, np, env, "", argv...)
}

// readRun reads a run, failing t on any problem, and checks the event
// counts Finish put in run.json (none when the library was preloaded by
// hand, without record) against the streams.
func readRun(t testing.TB, dir string) *trace.Run {
	t.Helper()
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m := run.Manifest; m != nil {
		for _, e := range m.Ranks {
			for _, rk := range run.Ranks {
				if rk.Info.Rank == e.Rank && e.Events != 0 && e.Events != int64(len(rk.Events)) {
					t.Errorf("rank %d: run.json counts %d events, its stream holds %d", e.Rank, e.Events, len(rk.Events))
				}
			}
		}
	}
	return run
}
