package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"

	"github.com/commprof/commprof/analyze"
)

// The straggler verdicts on MPI programs nobody changed for commprof,
// recorded through the PMPI library under Open MPI and MPICH: programs
// with known calls and a known stall (interpose/pmpi/testdata/stall.c and
// stall.py) in each pattern the replay follows, and clean runs of them.

// mpiKit is one MPI's compiler wrapper, its launcher and the PMPI library
// commprof records its programs with.
type mpiKit struct {
	flavor  string // openmpi or mpich
	cc, run string
	args    []string // options every launch needs
	lib     string
}

var mpiBuilt struct {
	sync.Mutex
	dir  string
	done map[string]error
}

// builtOnce runs f to make out once for the whole test binary.
func builtOnce(t *testing.T, name string, f func(out string) error) string {
	t.Helper()
	mpiBuilt.Lock()
	defer mpiBuilt.Unlock()
	if mpiBuilt.dir == "" {
		mpiBuilt.dir = filepath.Join(filepath.Dir(bin), "mpi")
		if err := os.MkdirAll(mpiBuilt.dir, 0o755); err != nil {
			t.Fatal(err)
		}
		mpiBuilt.done = map[string]error{}
	}
	out := filepath.Join(mpiBuilt.dir, name)
	err, ok := mpiBuilt.done[name]
	if !ok {
		err = f(out)
		mpiBuilt.done[name] = err
	}
	if err != nil {
		t.Fatalf("building %s: %v", name, err)
	}
	return out
}

func buildCmd(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v\n%s", name, err, out)
	}
	return nil
}

// findMPIKit finds an MPI and the PMPI library for it: the one `make`
// built beside the commprof binary, else one built here.
func findMPIKit(t *testing.T, flavor string) mpiKit {
	t.Helper()
	k := mpiKit{flavor: flavor}
	var err error
	switch flavor {
	case "openmpi":
		k.cc, err = exec.LookPath("mpicc.openmpi")
		if err == nil {
			k.run, err = exec.LookPath("mpirun.openmpi")
		}
		k.args = []string{"--allow-run-as-root", "--oversubscribe"}
	case "mpich":
		k.cc, err = exec.LookPath("mpicc.mpich")
		if err == nil {
			k.run, err = exec.LookPath("mpirun.mpich")
		}
	}
	if err != nil {
		if os.Getenv("COMMPROF_REQUIRE_DEPS") != "" {
			t.Fatalf("%s is not installed; `make test` installs it: %v", flavor, err)
		}
		t.Skipf("%s is not installed", flavor)
	}
	name := "libcommprof-pmpi-" + flavor + ".so"
	if lib, err := filepath.Abs(filepath.Join("..", "..", "bin", name)); err == nil {
		if _, err := os.Stat(lib); err == nil {
			k.lib = lib
			return k
		}
	}
	k.lib = builtOnce(t, name, func(out string) error {
		srcs, _ := filepath.Glob("../../interpose/pmpi/c/*.c")
		args := append([]string{"-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-o", out}, srcs...)
		return buildCmd(k.cc, append(args, "-lpthread", "-ldl")...)
	})
	return k
}

// stallProgram builds testdata's stall.c with k's compiler wrapper.
func stallProgram(t *testing.T, k mpiKit) string {
	t.Helper()
	return builtOnce(t, "stall-"+k.flavor, func(out string) error {
		return buildCmd(k.cc, "-O2", "-o", out, "../../interpose/pmpi/testdata/stall.c")
	})
}

var stalledLine = regexp.MustCompile(`rank (-?\d+) stalled (\d+) times for ([0-9.]+) ms`)

// recordMPI records program under k's launcher on 4 ranks (two cores),
// and returns its summary and how long the program says it stalled.
func recordMPI(t *testing.T, k mpiKit, program ...string) (*summaryView, float64) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	args := append([]string{"record", "--out", dir, "--", k.run}, k.args...)
	args = append(append(args, "-np", "4"), program...)
	r := truthRun(t, []string{"COMMPROF_PMPI_LIB=" + k.lib}, args...)
	if r.code != 0 {
		t.Fatalf("record: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	m := stalledLine.FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("the program did not say what it stalled:\n%s", r.stdout)
	}
	n, _ := strconv.Atoi(m[2])
	ms, _ := strconv.ParseFloat(m[3], 64)
	return &summaryView{statsJSON(t, dir)}, float64(n) * ms * 1e6
}

// TestTruthMPIStalls: in each pattern, under each MPI, the rank that slept
// 30 ms (MPICH: 60 ms) before one exchange in ten (6 of 60, each costing
// the job the stall as the others wait for its messages) is named first,
// its cost is within 35% of the time it stalled, and most of it is its own
// work; the run is replayed as a program, not judged call by call.
func TestTruthMPIStalls(t *testing.T) {
	oversubscribed(t)
	for _, flavor := range []string{"openmpi", "mpich"} {
		for i, pat := range []string{"coll", "halo", "icoll", "sub", "wait"} {
			slow := (i + 1) % 4
			t.Run(flavor+"-"+pat, func(t *testing.T) {
				k := findMPIKit(t, flavor)
				// MPICH's waiting ranks busy-poll, and while the slow rank
				// sleeps they catch up on the time they lost sharing cores:
				// with a core kept busy a 30 ms stall cost its job as little
				// as half of it. Its stalls are longer.
				stall := map[string]string{"openmpi": "30", "mpich": "60"}[flavor]
				s, stalled := recordMPI(t, k, stallProgram(t, k), pat, strconv.Itoa(slow), stall, "10", "60", "2")
				lo := 0.35
				if flavor == "mpich" && pat == "sub" {
					// While rank 0 sleeps, ranks 1 and 3 (the other
					// sub-communicator) run on until the world allreduce, on
					// cores rank 0 and its busy-polling partner would have
					// shared with them: with a core kept busy the job lost
					// 51-62% of the stalls, and the replay found as much.
					lo = 0.6
				}
				s.checkStall(t, slow, stalled, lo, 0.35)
			})
		}
	}
}

// TestTruthMPI4pyStalls: the same in mpi4py programs, through its buffer
// calls (Allreduce, Irecv/Isend/Waitall) and its pickled objects
// (allreduce, sendrecv), under Open MPI.
func TestTruthMPI4pyStalls(t *testing.T) {
	oversubscribed(t)
	py := debianPython(t)
	for i, pat := range []string{"coll", "halo", "obj"} {
		slow := (i + 2) % 4
		t.Run(pat, func(t *testing.T) {
			k := findMPIKit(t, "openmpi")
			s, stalled := recordMPI(t, k, py, "../../interpose/pmpi/testdata/stall.py", pat, strconv.Itoa(slow), "30", "10", "60", "2")
			s.checkStall(t, slow, stalled, 0.35, 0.35)
		})
	}
}

// TestTruthMPICleanRuns: the same programs with nothing injected name
// nobody, and say what noise they measured. Under Open MPI: MPICH's ranks
// busy-poll while they wait, and four of them on two cores starve one
// another for long stretches, a real cost that the verdict names
// (docs/metrics.md has MPICH's measured rates).
func TestTruthMPICleanRuns(t *testing.T) {
	oversubscribed(t)
	for _, flavor := range []string{"openmpi"} {
		for _, pat := range []string{"coll", "halo", "wait", "icoll"} {
			t.Run(flavor+"-"+pat, func(t *testing.T) {
				k := findMPIKit(t, flavor)
				s, _ := recordMPI(t, k, stallProgram(t, k), pat, "-1", "0", "10", "60", "2")
				st := s.Stragglers
				t.Logf("costliest rank %d: %.1f ms; noise bound %.1f ms", st.Ranks[0].Rank, float64(st.Ranks[0].CostNS)/1e6, float64(st.NoiseBoundNS)/1e6)
				if len(st.Named) != 0 || st.Reason != "" || st.NoiseBoundNS < 0 {
					t.Errorf("a clean run: named %v, reason %q, noise bound %d: %+v", st.Named, st.Reason, st.NoiseBoundNS, st.Ranks)
				}
			})
		}
	}
}

// debianPython returns Debian's python3 with mpi4py and numpy (which
// `make test` installs for it, not for another python3 on the PATH).
func debianPython(t *testing.T) string {
	t.Helper()
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import mpi4py, numpy").Run(); err != nil {
		if os.Getenv("COMMPROF_REQUIRE_DEPS") != "" {
			t.Fatalf("%s cannot import mpi4py and numpy; `make test` installs python3-mpi4py and python3-numpy: %v", py, err)
		}
		t.Skipf("%s has no mpi4py", py)
	}
	return py
}

// summaryView adds the stall checks to a summary.
type summaryView struct{ *analyze.Summary }

// checkStall checks that rank slow is named first, at a cost within
// [1-lo, 1+hi] of the time it stalled, mostly its own work.
func (s *summaryView) checkStall(t *testing.T, slow int, stalled, lo, hi float64) {
	t.Helper()
	st := s.Stragglers
	if st.Reason != "" || !st.SplitKnown {
		t.Fatalf("the run was not replayed as a program: %s", st.Reason)
	}
	if len(st.Named) == 0 || st.Named[0] != slow || s.Headline.Straggler != slow {
		t.Fatalf("named %v (headline %d), want rank %d first; noise bound %d ns: %+v", st.Named, s.Headline.Straggler, slow, st.NoiseBoundNS, st.Ranks)
	}
	rc := st.Ranks[0]
	cost := float64(rc.CostNS)
	t.Logf("rank %d: cost %.1f ms of %.1f ms stalled (%.0f%%), %.0f%% in its own work; noise bound %.1f ms; %d windows, replay error %d ns",
		slow, cost/1e6, stalled/1e6, 100*cost/stalled, 100*float64(rc.WorkNS)/cost, float64(st.NoiseBoundNS)/1e6, st.Windows, st.ReplayErrorNS)
	if cost < (1-lo)*stalled || cost > (1+hi)*stalled {
		t.Errorf("rank %d's cost %.1f ms is not within -%.0f%%/+%.0f%% of the %.1f ms it stalled", slow, cost/1e6, 100*lo, 100*hi, stalled/1e6)
	}
	if float64(rc.WorkNS) < 0.6*cost {
		t.Errorf("rank %d slept between its calls, yet only %.1f of its %.1f ms is its own work", slow, float64(rc.WorkNS)/1e6, cost/1e6)
	}
}
