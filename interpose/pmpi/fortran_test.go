package pmpi

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/trace"
)

// fortranCalls builds the expected events of the Fortran test programs.
type fortranCalls struct {
	r, n int
	w    []call
}

func (f *fortranCalls) coll(name, comm string, seq, bytes int64, root int32, dtype string) {
	f.w = append(f.w, call{kind: trace.KindCollective, name: name, comm: comm, seq: seq, bytes: bytes, peer: -1, root: root,
		dtype: dtype})
}

// wait adds the wait event of the operation just added.
func (f *fortranCalls) wait() {
	c := f.w[len(f.w)-1]
	c.kind = trace.KindWait
	f.w = append(f.w, c)
}

func (f *fortranCalls) msg(kind trace.Kind, tag, bytes int64, peer int, dtype string) {
	f.w = append(f.w, call{kind: kind, name: "sendrecv", comm: "world", seq: tag, bytes: bytes, peer: int32(peer), root: -1,
		dtype: dtype})
}

func (f *fortranCalls) mark(name, comm string, seq int64, value float64, check bool) {
	f.w = append(f.w, call{kind: trace.KindMark, name: name, comm: comm, seq: seq, peer: -1, root: -1, value: value,
		checkValue: check})
}

// rootOr is all on rank root and own on the others.
func (f *fortranCalls) rootOr(root int, all, own int64) int64 {
	if f.r == root {
		return all
	}
	return own
}

// interName stands for the intercommunicator's name in wantFortran: its
// hash of the two groups' members is checked for its form and for
// agreeing across ranks, not recomputed.
const interName = "INTER"

// wantFortran is what testdata/calls.f90 records on rank r of 3, in the
// order of the stream.
func wantFortran(r int) []call {
	const n = 3
	f := &fortranCalls{r: r, n: n}
	left, right := (r+n-1)%n, (r+1)%n
	const sum = 8 * (1 + 2 + 3) // doubles, counts 1..n
	f.mark(MarkComm, "world", int64(r), n, true)
	f.mark(MarkInit, "", -1, 0, false)
	for i, c := range []struct {
		name  string
		bytes int64
		root  int32
		dtype string
	}{
		{"allreduce", 800, -1, "float64"},
		{"allreduce", 800, -1, "float64"}, // MPI_IN_PLACE
		{"broadcast", 80, 1, "float64"},
		{"reduce", 32, 2, "int32"},
		{"allgather", 32 * n, -1, "float64"},
		{"allgatherv", sum, -1, "float64"},
		{"gather", 16 * n, 0, "float64"}, // MPI_IN_PLACE on the root
		{"gatherv", f.rootOr(0, sum, 8*int64(r+1)), 0, "float64"},
		{"scatter", 24 * n, 1, "float64"},
		{"scatterv", f.rootOr(1, sum, 8*int64(r+1)), 1, "float64"},
		{"reducescatter", 40 * n, -1, "float64"},
		{"reducescatterv", sum, -1, "float64"},
		{"alltoall", 16 * n, -1, "float64"},
		{"alltoall", 16 * n, -1, "float64"}, // MPI_IN_PLACE: the receive buffer's, not 2 INTEGERs
		{"alltoallv", sum, -1, "float64"},
		{"alltoallw", 8 * n, -1, ""},
		{"barrier", 0, -1, ""},
		{"scan", 56, -1, "float64"},
		{"exscan", 56, -1, "float64"},
	} {
		f.coll(c.name, "world", int64(i), c.bytes, c.root, c.dtype)
	}
	// Non-blocking, completed by MPI_Wait, MPI_Test, MPI_Waitall,
	// MPI_Waitany, MPI_Waitsome and MPI_Testany.
	for i, c := range []struct {
		name  string
		bytes int64
		root  int32
		dtype string
	}{
		{"allreduce", 800, -1, "float64"}, {"broadcast", 400, 0, "float64"}, {"barrier", 0, -1, ""},
		{"allgather", 32 * n, -1, "float64"}, {"alltoallw", 8 * n, -1, ""}, {"reduce", 80, 1, "float64"},
		{"allreduce", 40, -1, "float64"},
	} {
		f.coll(c.name, "world", int64(19+i), c.bytes, c.root, c.dtype)
		f.wait()
	}
	const dp = "float64"
	f.msg(trace.KindSend, 7, 800, right, dp)
	f.msg(trace.KindRecv, 7, 800, left, dp)
	switch r {
	case 0:
		f.msg(trace.KindSend, 11, 80, 1, dp)
		f.msg(trace.KindSend, 12, 160, 2, dp)
	case 1:
		f.msg(trace.KindRecv, 11, 80, 0, dp) // MPI_ANY_SOURCE, MPI_ANY_TAG: from the status
	case 2:
		f.msg(trace.KindRecv, 12, 160, 0, dp)
	}
	f.msg(trace.KindRecv, 21, 240, left, dp) // MPI_Waitall
	f.wait()
	f.msg(trace.KindSend, 21, 240, right, dp)
	f.wait()
	f.msg(trace.KindRecv, 32, 48, left, dp) // MPI_Testall
	f.wait()
	f.msg(trace.KindSend, 32, 48, right, dp)
	f.wait()
	f.msg(trace.KindRecv, 33, 40, left, dp)
	f.msg(trace.KindSend, 33, 40, right, dp) // MPI_Testsome
	f.wait()
	f.msg(trace.KindSend, 35, 56, right, dp) // freed before it completed
	f.msg(trace.KindRecv, 35, 56, left, dp)
	f.msg(trace.KindSend, 36, 32, right, dp) // MPI_Sendrecv_replace
	f.msg(trace.KindRecv, 36, 32, left, dp)
	f.msg(trace.KindSend, 37, 32, right, "derived:hindexed") // from MPI_BOTTOM
	f.msg(trace.KindRecv, 37, 32, left, dp)
	f.coll("broadcast", "world", 26, 32, 0, "derived:hindexed")
	switch r {
	case 0:
		f.msg(trace.KindSend, 38, 72, 1, dp)
		f.msg(trace.KindSend, 39, 24, 2, dp)
	case 1:
		f.msg(trace.KindRecv, 38, 72, 0, dp) // MPI_Mprobe, MPI_Mrecv
	case 2:
		f.msg(trace.KindRecv, 39, 24, 0, dp) // MPI_Improbe, MPI_Imrecv, MPI_Wait
		f.wait()
	}

	// The split: key -rank puts the higher world rank first.
	color := r % 2
	sub := fmt.Sprintf("world/split0:%d", color)
	subRank, subSize := map[int]int64{0: 1, 1: 0, 2: 0}[r], map[int]float64{0: 2, 1: 1}[color]
	f.coll("comm_split", "world", 27, 0, -1, "")
	f.mark(MarkComm, sub, subRank, subSize, true)
	f.coll("allreduce", sub, 0, 80, -1, dp)
	f.coll("comm_dup", sub, 1, 0, -1, "")
	f.mark(MarkComm, sub+"/dup0", subRank, subSize, true)
	f.coll("barrier", sub+"/dup0", 0, 0, -1, "")
	f.coll("comm_dup", sub, 2, 0, -1, "") // MPI_Comm_idup: named at the call, made at its MPI_Wait
	f.wait()
	f.mark(MarkComm, sub+"/dup1", subRank, subSize, true)
	f.coll("barrier", sub+"/dup1", 0, 0, -1, "")
	f.coll("comm_create", "world", 28, 0, -1, "")
	if color == 0 {
		f.mark(MarkComm, "world/create1:0", int64(r/2), 2, true)
		f.coll("allreduce", "world/create1:0", 0, 8, -1, dp)
	}
	f.coll("intercomm_create", sub, 3, 0, -1, "")
	f.coll("intercomm_merge", interName, 0, 0, -1, "")
	// The low group (the evens, in their order: 2, 0) first, then 1.
	f.mark(MarkComm, interName+"/merge0", map[int]int64{2: 0, 0: 1, 1: 2}[r], 3, true)
	f.coll("allreduce", interName+"/merge0", 0, 16, -1, dp)
	f.coll("barrier", "world", 29, 0, -1, "")
	f.mark(MarkFinalize, "", -1, 0, false)
	return f.w
}

// wantFortran08 is what testdata/calls_f08.f90 records on rank r of 3.
func wantFortran08(r int) []call {
	const n = 3
	f := &fortranCalls{r: r, n: n}
	left, right := (r+n-1)%n, (r+1)%n
	const dp = "float64"
	f.mark(MarkComm, "world", int64(r), n, true)
	f.mark(MarkInit, "", -1, 0, false)
	f.coll("allreduce", "world", 0, 800, -1, dp)
	f.coll("allreduce", "world", 1, 800, -1, dp)
	f.coll("broadcast", "world", 2, 80, 1, dp)
	f.coll("gather", "world", 3, 16*n, 0, dp)
	f.coll("allreduce", "world", 4, 80, -1, dp)
	f.wait()
	f.msg(trace.KindRecv, 21, 240, left, dp)
	f.wait()
	f.msg(trace.KindSend, 21, 240, right, dp)
	f.wait()
	f.msg(trace.KindSend, 7, 80, right, dp)
	f.msg(trace.KindRecv, 7, 80, left, dp)
	f.coll("comm_split", "world", 5, 0, -1, "")
	sub := fmt.Sprintf("world/split0:%d", r%2)
	f.mark(MarkComm, sub, int64(r/2), map[int]float64{0: 2, 1: 1}[r%2], true)
	f.coll("allreduce", sub, 0, 8, -1, dp)
	f.coll("barrier", "world", 6, 0, -1, "")
	f.mark(MarkFinalize, "", -1, 0, false)
	return f.w
}

// interComm matches the name the library gives calls.f90's
// intercommunicator: the two groups' lowest world ranks, a hash of their
// members, and how many were made between them before.
var interComm = regexp.MustCompile(`^inter:0-1\.[0-9a-f]{8}\.0$`)

// TestFortran records Fortran programs through commprof record: calls.f90
// (use mpi) built with MPICH's compiler, whose Fortran bindings call the
// C functions, and with Open MPI's, whose bindings call PMPI directly and
// are recorded through the library's own Fortran entry points; and
// calls_f08.f90 (use mpi_f08) with Open MPI, whose mpi_f08 module calls
// yet other entry points. Each rank's events are compared one by one:
// MPI_IN_PLACE and MPI_BOTTOM as Fortran passes them, request arrays,
// statuses, indices counted from 1, matched probes, communicators made
// and freed.
func TestFortran(t *testing.T) {
	type prog struct {
		m    mpiTools
		src  string
		want func(int) []call
	}
	var progs []prog
	for _, f := range []Flavor{MPICH, OpenMPI} {
		progs = append(progs, prog{findMPI(t, f), "calls", wantFortran})
	}
	progs = append(progs, prog{findMPI(t, OpenMPI), "calls_f08", wantFortran08})
	for _, p := range progs {
		t.Run(p.src+"/"+string(p.m.flavor), func(t *testing.T) {
			run := recordFortran(t, p.m, p.src)
			if len(run.Ranks) != 3 || len(run.Problems) != 0 || run.Manifest.Status != trace.StatusComplete {
				t.Fatalf("%d ranks, problems %v, status %s", len(run.Ranks), run.Problems, run.Manifest.Status)
			}
			inter := ""
			for _, rk := range run.Ranks {
				for _, e := range rk.Events {
					if e.Name == "intercomm_merge" {
						if inter != "" && e.Comm != inter {
							t.Errorf("the intercommunicator is %q on one rank and %q on rank %d", inter, e.Comm, rk.Info.Rank)
						}
						inter = e.Comm
					}
				}
			}
			if p.src == "calls" && !interComm.MatchString(inter) {
				t.Errorf("the intercommunicator is named %q, want a match of %s", inter, interComm)
			}
			for _, rk := range run.Ranks {
				want := p.want(rk.Info.Rank)
				for i := range want {
					want[i].comm = strings.Replace(want[i].comm, interName, inter, 1)
				}
				compareCalls(t, rk.Info.Rank, rk.Events, want)
			}
			checkSpans(t, run)
			checkConservation(t, run)
		})
	}
}

// TestFortranNotRecorded: MPICH's mpi_f08 module calls PMPI_Init itself,
// so a program that uses it is not recorded, and record says why.
func TestFortranNotRecorded(t *testing.T) {
	m := findMPI(t, MPICH)
	fc := fortranCompiler(t, m)
	prog := filepath.Join(work, "calls_f08-f90-"+string(m.flavor))
	build(t, prog, func() error { return run(".", fc, "-O2", "-o", prog, "testdata/calls_f08.f90") })
	library(t, m)
	dir := filepath.Join(t.TempDir(), "f")
	args := append(append([]string{"record", "--out", dir, "--", m.run}, m.args...), "-np", "3", prog)
	res := command(t, nil, "", commprofBin(t), args...)
	if res.err == nil || !strings.Contains(res.stderr, "no rank of it was recorded") ||
		!strings.Contains(res.stderr, "MPICH's mpi_f08 module") {
		t.Fatalf("record: %v\n%s", res.err, res.stderr)
	}
}

func fortranCompiler(t *testing.T, m mpiTools) string {
	t.Helper()
	fc, err := exec.LookPath("mpif90." + string(m.flavor))
	if err != nil {
		need(t, "mpif90."+string(m.flavor)+" is not installed")
	}
	return fc
}

// recordFortran builds testdata/src.f90 with m's compiler and records it
// on 3 ranks, keeping the streams in the order the library wrote them.
func recordFortran(t *testing.T, m mpiTools, src string) *trace.Run {
	t.Helper()
	fc := fortranCompiler(t, m)
	prog := filepath.Join(work, src+"-f90-"+string(m.flavor))
	build(t, prog, func() error { return run(".", fc, "-O2", "-o", prog, filepath.Join("testdata", src+".f90")) })
	library(t, m)
	dir := filepath.Join(t.TempDir(), "f")
	args := append(append([]string{"record", "--out", dir, "--", m.run}, m.args...), "-np", "3", prog)
	// Streams as written: compacted ones are sorted by start time.
	res := command(t, []string{envnames.Compact + "=off"}, "", commprofBin(t), args...)
	if res.err != nil {
		t.Fatalf("record: %v\n%s%s", res.err, res.stdout, res.stderr)
	}
	return readRun(t, dir)
}
