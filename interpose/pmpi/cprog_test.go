package pmpi

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/trace"
)

// p2pKey is one message as one side recorded it.
type p2pKey struct {
	kind  trace.Kind
	comm  string
	tag   int64
	bytes int64
	peer  int32
}

// wantCMessages is what testdata/calls.c sends and receives on rank r
// of 4, as a multiset.
func wantCMessages(r int) map[p2pKey]int {
	left, right := int32((r+3)%4), int32((r+1)%4)
	w := map[p2pKey]int{}
	for _, m := range []struct{ tag, bytes int64 }{{1, 64}, {2, 128}, {3, 256}, {4, 64}, {10, 64}, {11, 64}, {12, 64},
		{20, 32}, {21, 16}, {22, 24}, {30, 40}, {40, 48}} {
		w[p2pKey{trace.KindSend, "world", m.tag, m.bytes, right}]++
		w[p2pKey{trace.KindRecv, "world", m.tag, m.bytes, left}]++
	}
	for k := range 4 {
		comm := fmt.Sprintf("world/dup%d", 3+k)
		w[p2pKey{trace.KindSend, comm, int64(k), 32, right}] += 50
		w[p2pKey{trace.KindRecv, comm, int64(k), 32, left}] += 50
	}
	if r == 0 {
		for q := 1; q < 4; q++ {
			w[p2pKey{trace.KindRecv, "world", 50, 4, int32(q)}]++
		}
	} else {
		w[p2pKey{trace.KindSend, "world", 50, 4, 0}]++
	}
	return w
}

// TestCProgram records a C program built with MPICH's compiler wrapper
// under MPICH's mpirun, through commprof record (which finds MPICH from
// the launcher and compacts the streams): every send mode, completion
// call, communicator constructor, datatype kind, threads and
// MPI_Pcontrol, checked call by call.
func TestCProgram(t *testing.T) {
	m := findMPI(t, MPICH)
	prog := cProgram(t, m, "calls")
	library(t, m)
	bin := commprofBin(t)
	dir := filepath.Join(t.TempDir(), "c")
	res := command(t, nil, "", bin, "record", "--out", dir, "--", "mpirun.mpich", "-np", "4", prog)
	if res.err != nil {
		t.Fatalf("record: %v\n%s%s", res.err, res.stdout, res.stderr)
	}
	run := readRun(t, dir)
	if len(run.Ranks) != 4 || len(run.Problems) != 0 {
		t.Fatalf("%d ranks, problems %v", len(run.Ranks), run.Problems)
	}
	man := run.Manifest
	// Finish counted every stream for run.json (readRun checks each
	// count against its stream), and record printed their sum.
	var total int64
	for _, e := range man.Ranks {
		if e.Events == 0 {
			t.Errorf("rank %d has no event count in run.json", e.Rank)
		}
		total += e.Events
	}
	if want := fmt.Sprintf("4 ranks, %d events,", total); !strings.Contains(res.stdout, want) {
		t.Errorf("record printed no %q:\n%s", want, res.stdout)
	}
	if man.Status != trace.StatusComplete || man.Codec != trace.Zstd || man.Launcher != "pmi" || man.Config["mpi"] != "mpich" ||
		!strings.HasPrefix(man.Source.Tool, "MPICH Version: 4") {
		t.Errorf("manifest: status %s, codec %s, launcher %s, config %v, source %+v", man.Status, man.Codec, man.Launcher,
			man.Config, man.Source)
	}
	wantComms := map[string]string{"comms": "10", "comm world": "0-3", "comm world/split_type0:0": "0-3",
		"comm world/create1:0": "0,2", "comm world/cart2": "0-3", "comm world/cart2/cart_sub0:0": "0,1",
		"comm world/cart2/cart_sub0:2": "2,3", "comm world/dup3": "0-3", "comm world/dup6": "0-3"}
	for k, v := range wantComms {
		if man.Config[k] != v {
			t.Errorf("manifest config %q = %q, want %q", k, man.Config[k], v)
		}
	}

	type coll struct {
		name  string
		bytes int64
		dtype string
		root  int32
	}
	worldWant := []coll{{"allreduce", 1024, "float64", -1}, {"allreduce", 1024, "float64", -1},
		{"allreduce", 1024, "float64", -1}, {"broadcast", 60, "derived:struct", 3}, {"broadcast", 40, "particle", 0},
		{"barrier", 0, "", -1}, {"barrier", 0, "", -1}, {"comm_split_type", 0, "", -1}, {"comm_create", 0, "", -1},
		{"cart_create", 0, "", -1}, {"comm_dup", 0, "", -1}, {"comm_dup", 0, "", -1}, {"comm_dup", 0, "", -1},
		{"comm_dup", 0, "", -1}, {"alltoallw", 64, "", -1}, {"broadcast", 4, "int32", 0}}
	for _, rk := range run.Ranks {
		r := rk.Info.Rank
		var world []coll
		other := map[string][]coll{}
		msgs := map[p2pKey]int{}
		var waits int
		var polled, told *trace.Event // the broadcast polled with MPI_Test, and the message saying it was tested
		var pcontrol []float64
		for i, e := range rk.Events {
			switch e.Kind {
			case trace.KindCollective:
				c := coll{e.Name, e.Bytes, e.DType, e.Root}
				if e.Comm == "world" {
					if e.Seq != int64(len(world)) {
						t.Errorf("rank %d: world collective %s has seq %d, want %d", r, e.Name, e.Seq, len(world))
					}
					world = append(world, c)
				} else {
					other[e.Comm] = append(other[e.Comm], c)
				}
			case trace.KindSend, trace.KindRecv:
				msgs[p2pKey{e.Kind, e.Comm, e.Seq, e.Bytes, e.Peer}]++
				if e.Kind == trace.KindSend && e.Seq == 50 {
					told = &rk.Events[i]
				}
			case trace.KindWait:
				waits++
				if e.Name == "broadcast" && e.Comm == "world" && e.Seq == 15 {
					polled = &rk.Events[i]
				}
			case trace.KindMark:
				if e.Name == MarkPcontrol {
					pcontrol = append(pcontrol, e.Value)
				}
			}
		}
		if !slices.Equal(world, worldWant) {
			t.Errorf("rank %d: world collectives\n got  %v\n want %v", r, world, worldWant)
		}
		row := fmt.Sprintf("world/cart2/cart_sub0:%d", r/2*2)
		wantOther := map[string][]coll{"world/split_type0:0": {{"allreduce", 32, "float64", -1}},
			"world/cart2": {{"cart_sub", 0, "", -1}}, row: {{"allreduce", 16, "float64", -1}}}
		if r%2 == 0 {
			wantOther["world/create1:0"] = []coll{{"barrier", 0, "", -1}}
		}
		if fmt.Sprint(other) != fmt.Sprint(wantOther) {
			t.Errorf("rank %d: other collectives\n got  %v\n want %v", r, other, wantOther)
		}
		if want := wantCMessages(r); fmt.Sprint(msgs) != fmt.Sprint(want) {
			t.Errorf("rank %d: messages\n got  %v\n want %v", r, msgs, want)
		}
		// Waitany 1, Waitsome 6, Testall 2, Testany 2, Testsome 2, the
		// broadcast 1: the request freed unfinished has none.
		if waits != 14 {
			t.Errorf("rank %d: %d wait events, want 14", r, waits)
		}
		// Polled from before the root started it: the wait began at the
		// first MPI_Test, before the rank said it had tested.
		if r != 0 && (polled == nil || told == nil || polled.Start > told.Start) {
			t.Errorf("rank %d: the polled broadcast's wait %+v does not begin before the message after its first test %+v", r, polled, told)
		}
		if !slices.Equal(pcontrol, []float64{0, 1}) {
			t.Errorf("rank %d: pcontrol marks %v, want [0 1]", r, pcontrol)
		}
	}
	checkSpans(t, run)
	checkConservation(t, run)
}

// checkConservation checks that every message sent was received once,
// by the rank it was sent to, with the bytes it was sent with.
func checkConservation(t *testing.T, run *trace.Run) {
	t.Helper()
	type msg struct {
		from, to int32
		comm     string
		tag      int64
		bytes    int64
	}
	n := map[msg]int{}
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			switch e.Kind {
			case trace.KindSend:
				n[msg{e.Rank, e.Peer, e.Comm, e.Seq, e.Bytes}]++
			case trace.KindRecv:
				n[msg{e.Peer, e.Rank, e.Comm, e.Seq, e.Bytes}]--
			}
		}
	}
	if len(n) == 0 {
		t.Error("no messages recorded")
	}
	for k, c := range n {
		if c != 0 {
			t.Errorf("message %+v: %d more sends than receives", k, c)
		}
	}
}

// TestWithoutFinalize records a program that ends with exit(0) and never
// calls MPI_Finalize: every event is kept, written when the process
// exits, the stream ends without the end-of-stream marker, and record
// says the run failed. One rank: with more, the launcher kills the others
// when the first exits so.
func TestWithoutFinalize(t *testing.T) {
	m := findMPI(t, MPICH)
	prog := cProgram(t, m, "unfinished")
	library(t, m)
	bin := commprofBin(t)
	dir := filepath.Join(t.TempDir(), "c")
	res := command(t, []string{envnames.Flush + "=1h"}, "", bin, "record", "--out", dir, "--", "mpirun.mpich", "-np", "1", prog, "1000")
	if res.err == nil || !strings.Contains(res.stderr, "stream was cut (it ended without MPI_Finalize)") {
		t.Fatalf("record: %v\n%s%s", res.err, res.stdout, res.stderr)
	}
	run := readRun(t, dir)
	if run.Manifest.Status != trace.StatusFailed || len(run.Ranks) != 1 || run.Ranks[0].Truncated == nil {
		t.Fatalf("status %s, %d ranks, problems %v", run.Manifest.Status, len(run.Ranks), run.Problems)
	}
	n := 0
	for _, e := range run.Ranks[0].Events {
		if e.Kind == trace.KindCollective && e.Name == "allreduce" && e.Seq == int64(n) {
			n++
		}
	}
	if n != 1000 {
		t.Errorf("%d allreduces recorded in order, want 1000", n)
	}
}
