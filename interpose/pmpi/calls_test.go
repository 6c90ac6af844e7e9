package pmpi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/arrow/array"
	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"

	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/trace"
)

// call is what the test knows of one recorded event.
type call struct {
	kind       trace.Kind
	name, comm string
	seq, bytes int64
	peer, root int32
	dtype      string
	value      float64 // marks with a known value only
	checkValue bool
}

func (c call) String() string {
	return fmt.Sprintf("%s %s comm=%q seq=%d bytes=%d peer=%d root=%d dtype=%q", c.kind, c.name, c.comm, c.seq, c.bytes,
		c.peer, c.root, c.dtype)
}

func callOf(e trace.Event) call {
	return call{kind: e.Kind, name: e.Name, comm: e.Comm, seq: e.Seq, bytes: e.Bytes, peer: e.Peer, root: e.Root,
		dtype: e.DType, value: e.Value}
}

// pickled is how long mpi4py's pickles of calls.py's lowercase calls
// are, as the script says: its payload, and a small int.
type pickled struct{ payload, small int64 }

// wantCalls is what testdata/calls.py records on rank r of n (n = 3: the
// split gives {0, 2} and {1}), in the order of the stream.
func wantCalls(r, n int, p pickled) []call {
	var w []call
	coll := func(name, comm string, seq, bytes int64, root int32, dtype string) {
		w = append(w, call{kind: trace.KindCollective, name: name, comm: comm, seq: seq, bytes: bytes, peer: -1,
			root: root, dtype: dtype})
	}
	wait := func() { // the wait event of the call just added
		c := w[len(w)-1]
		c.kind = trace.KindWait
		w = append(w, c)
	}
	msgOf := func(kind trace.Kind, comm string, tag, bytes int64, peer int, dtype string) {
		w = append(w, call{kind: kind, name: "sendrecv", comm: comm, seq: tag, bytes: bytes, peer: int32(peer),
			root: -1, dtype: dtype})
	}
	msg := func(kind trace.Kind, comm string, tag, bytes int64, peer int) {
		msgOf(kind, comm, tag, bytes, peer, "float64")
	}
	mark := func(name, comm string, seq int64, value float64, check bool) {
		w = append(w, call{kind: trace.KindMark, name: name, comm: comm, seq: seq, peer: -1, root: -1, value: value,
			checkValue: check})
	}
	sumCounts := int64(n * (n + 1) / 2) // counts are 1..n
	rootOr := func(root int, all, own int64) int64 {
		if r == root {
			return all
		}
		return own
	}
	left, right := (r-1+n)%n, (r+1)%n
	const world = "world"

	mark(MarkComm, world, int64(r), float64(n), true)
	mark(MarkInit, "", -1, 0, false)
	coll("barrier", world, 0, 0, -1, "")
	coll("allreduce", world, 1, 8000, -1, "float64")
	coll("broadcast", world, 2, 800, 1, "float64")
	coll("reduce", world, 3, 40, 2, "int32")
	coll("allgather", world, 4, 64*int64(n), -1, "float32")
	coll("allgatherv", world, 5, 8*sumCounts, -1, "float64")
	coll("gather", world, 6, 32*int64(n), 0, "int64")
	coll("gatherv", world, 7, rootOr(0, 8*sumCounts, 8*int64(r+1)), 0, "float64")
	coll("scatter", world, 8, 12*int64(n), 1, "float32")
	coll("scatterv", world, 9, rootOr(1, 8*sumCounts, 8*int64(r+1)), 1, "float64")
	coll("reducescatter", world, 10, 40*int64(n), -1, "float64")
	coll("reducescatterv", world, 11, 8*sumCounts, -1, "float64")
	coll("alltoall", world, 12, 8*int64(n), -1, "int32")
	coll("alltoallv", world, 13, 8*sumCounts, -1, "float64")
	coll("alltoallw", world, 14, 8*int64(n), -1, "")
	coll("scan", world, 15, 56, -1, "float64")
	coll("exscan", world, 16, 56, -1, "float64")
	coll("allreduce", world, 17, 8000, -1, "float64")
	wait()
	coll("broadcast", world, 18, 400, 0, "float64")
	wait()
	coll("barrier", world, 19, 0, -1, "")
	wait()
	coll("allgather", world, 20, 32*int64(n), -1, "float64")
	wait()
	coll("broadcast", world, 21, 64, 0, "derived:vector")

	msg(trace.KindSend, world, 7, 800, right)
	msg(trace.KindRecv, world, 7, 800, left)
	switch r {
	case 0:
		msg(trace.KindSend, world, 11, 80, 1)
		msg(trace.KindSend, world, 12, 160, 2)
	case 1:
		msg(trace.KindRecv, world, 11, 80, 0) // ANY_SOURCE, ANY_TAG: from the status
	case 2:
		msg(trace.KindRecv, world, 12, 160, 0)
	}
	msg(trace.KindRecv, world, 21, 240, left)
	wait()
	msg(trace.KindSend, world, 21, 240, right)
	wait()

	coll("comm_split", world, 22, 0, -1, "")
	color := r % 2
	sub := fmt.Sprintf("world/split0:%d", color)
	// key = -r: the larger world rank comes first.
	var members []int
	for q := n - 1; q >= 0; q-- {
		if q%2 == color {
			members = append(members, q)
		}
	}
	subRank := 0
	for i, q := range members {
		if q == r {
			subRank = i
		}
	}
	mark(MarkComm, sub, int64(subRank), float64(len(members)), true)
	coll("allreduce", sub, 0, 80, -1, "float64")
	if len(members) > 1 {
		other := members[1-subRank]
		msg(trace.KindSend, sub, 3, 40, other)
		msg(trace.KindRecv, sub, 3, 40, other)
	}
	coll("comm_dup", sub, 1, 0, -1, "")
	mark(MarkComm, sub+"/dup0", int64(subRank), float64(len(members)), true)
	coll("barrier", sub+"/dup0", 0, 0, -1, "")
	coll("barrier", world, 23, 0, -1, "")

	// The other non-blocking collectives, completed by one MPI_Waitall.
	for i, c := range []struct {
		name  string
		bytes int64
		root  int32
		dtype string
	}{
		{"reduce", 40, 2, "int32"},
		{"allgatherv", 8 * sumCounts, -1, "float64"},
		{"gather", 32 * int64(n), 0, "int64"},
		{"gatherv", rootOr(0, 8*sumCounts, 8*int64(r+1)), 0, "float64"},
		{"scatter", 12 * int64(n), 1, "float32"},
		{"scatterv", rootOr(1, 8*sumCounts, 8*int64(r+1)), 1, "float64"},
		{"reducescatter", 40 * int64(n), -1, "float64"},
		{"reducescatterv", 8 * sumCounts, -1, "float64"},
		{"alltoall", 8 * int64(n), -1, "int32"},
		{"alltoallv", 8 * sumCounts, -1, "float64"},
		{"alltoallw", 8 * int64(n), -1, ""},
		{"scan", 56, -1, "float64"},
		{"exscan", 56, -1, "float64"},
	} {
		coll(c.name, world, int64(24+i), c.bytes, c.root, c.dtype)
		wait()
	}

	// The pickle API: pickles are bytes, their lengths int32s.
	bmsg := func(kind trace.Kind, comm string, tag, bytes int64, peer int) {
		msgOf(kind, comm, tag, bytes, peer, "byte")
	}
	switch r {
	case 0:
		bmsg(trace.KindSend, world, 41, p.payload, 1)
	case 1:
		bmsg(trace.KindRecv, world, 41, p.payload, 0) // MPI_Mprobe, MPI_Mrecv
	}
	bmsg(trace.KindRecv, world, 42, p.payload, left)  // sendrecv: its recv
	bmsg(trace.KindSend, world, 42, p.payload, right) // and its MPI_Isend, at the MPI_Wait
	wait()
	coll("broadcast", world, 37, 4, 0, "int32")
	coll("broadcast", world, 38, p.payload, 0, "byte")
	// allreduce: a reduction to rank 0 over a binomial tree, point to
	// point on world/dup1 with tag 0, then its broadcast.
	coll("comm_dup", world, 39, 0, -1, "")
	mark(MarkComm, world+"/dup1", int64(r), float64(n), true)
	dup := world + "/dup1"
	for mask := 1; mask < n; mask <<= 1 { // as mpi4py's PyMPI_reduce_p2p
		switch {
		case r&mask != 0:
			msgOf(trace.KindSend, dup, 0, 4, (r&^mask)%n, "int32")
			msgOf(trace.KindSend, dup, 0, p.small, (r&^mask)%n, "byte")
		case r|mask < n:
			msgOf(trace.KindRecv, dup, 0, 4, r|mask, "int32")
			msgOf(trace.KindRecv, dup, 0, p.small, r|mask, "byte")
		}
	}
	coll("broadcast", dup, 0, 4, 0, "int32")
	coll("broadcast", dup, 1, p.small, 0, "byte")
	switch r {
	case 0:
		bmsg(trace.KindSend, world, 43, p.payload, 2)
	case 2:
		bmsg(trace.KindRecv, world, 43, p.payload, 0) // MPI_Improbe, MPI_Imrecv, MPI_Wait
		wait()
	}
	coll("barrier", world, 40, 0, -1, "")
	mark(MarkFinalize, "", -1, 0, false)
	return w
}

// pickledSizes reads what calls.py says of its pickles.
func pickledSizes(t *testing.T, stdout string) pickled {
	t.Helper()
	m := regexp.MustCompile(`(?m)^pickled (\d+) (\d+)$`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("calls.py did not say how long its pickles are:\n%s", stdout)
	}
	var p pickled
	p.payload, _ = strconv.ParseInt(m[1], 10, 64)
	p.small, _ = strconv.ParseInt(m[2], 10, 64)
	return p
}

// compareCalls checks a rank's events against want, in order. The
// sampling thread's readings come whenever its clock says: they are
// left out here (sample_test.go checks them).
func compareCalls(t *testing.T, rank int, evs []trace.Event, want []call) {
	t.Helper()
	evs = slices.DeleteFunc(slices.Clone(evs), func(e trace.Event) bool { return e.Kind == trace.KindSample })
	n := min(len(evs), len(want))
	for i := range n {
		got := callOf(evs[i])
		w := want[i]
		if !w.checkValue {
			got.value = 0
		}
		w.checkValue = false
		if got != w {
			t.Errorf("rank %d event %d:\n got  %v (value %g)\n want %v (value %g)", rank, i, got, got.value, w, w.value)
		}
	}
	if len(evs) != len(want) {
		for i := n; i < len(evs); i++ {
			t.Errorf("rank %d: unexpected event %d: %v", rank, i, callOf(evs[i]))
		}
		for i := n; i < len(want); i++ {
			t.Errorf("rank %d: missing event %d: %v", rank, i, want[i])
		}
	}
}

// checkSpans checks what holds of every recorded run: durations are not
// negative, a wait lies inside the span of an operation it waited for and
// ends with it, every rank numbers its collectives alike, and no rank
// leaves a barrier before the last has entered it (the clocks agree).
func checkSpans(t *testing.T, run *trace.Run) {
	t.Helper()
	type key struct {
		comm string
		seq  int64
	}
	names := map[key]string{}
	type span struct{ lastStart, firstEnd int64 }
	barriers := map[key]*span{}
	type opKey struct {
		name, comm string
		seq, bytes int64
		peer       int32
		end        int64
	}
	for _, rk := range run.Ranks {
		ops := map[opKey][]int64{} // starts of the operations that end then
		for _, e := range rk.Events {
			if e.Kind == trace.KindCollective || e.Kind == trace.KindSend || e.Kind == trace.KindRecv {
				k := opKey{e.Name, e.Comm, e.Seq, e.Bytes, e.Peer, e.End()}
				ops[k] = append(ops[k], e.Start)
			}
		}
		for i, e := range rk.Events {
			if e.Dur < 0 || e.Wait < 0 {
				t.Errorf("rank %d event %d: negative duration %+v", rk.Info.Rank, i, e)
			}
			if e.Kind == trace.KindWait {
				inside := false
				for _, s := range ops[opKey{e.Name, e.Comm, e.Seq, e.Bytes, e.Peer, e.End()}] {
					inside = inside || s <= e.Start
				}
				if !inside {
					t.Errorf("rank %d: wait %+v is not inside an operation it waited for", rk.Info.Rank, e)
				}
			}
			if e.Kind != trace.KindCollective {
				continue
			}
			k := key{e.Comm, e.Seq}
			if n, ok := names[k]; ok && n != e.Name {
				t.Errorf("%s seq %d is %s on one rank and %s on rank %d", e.Comm, e.Seq, n, e.Name, rk.Info.Rank)
			}
			names[k] = e.Name
			if e.Name == "barrier" {
				s := barriers[k]
				if s == nil {
					s = &span{e.Start, e.End()}
					barriers[k] = s
				}
				s.lastStart, s.firstEnd = max(s.lastStart, e.Start), min(s.firstEnd, e.End())
			}
		}
	}
	for k, s := range barriers {
		if s.lastStart > s.firstEnd {
			t.Errorf("barrier %s seq %d: a rank left %d ns before the last entered", k.comm, k.seq, s.lastStart-s.firstEnd)
		}
	}
}

// TestMPI4PyCalls records a Python program whose every MPI call is known,
// under Open MPI's mpirun through commprof record, and checks each rank's
// events one by one, the manifest, and that Arrow Go's reader and Apache
// Arrow JS read the streams as the C library wrote them: flushed every 10 ms while the
// program pauses twice for 200 ms, in several batches, the later ones
// carrying dictionary deltas (new datatypes, then communicators).
func TestMPI4PyCalls(t *testing.T) {
	m := findMPI(t, OpenMPI)
	py := python(t)
	library(t, m)
	bin := commprofBin(t)
	dir := filepath.Join(t.TempDir(), "calls")
	script, _ := filepath.Abs("testdata/calls.py")
	res := command(t, []string{envnames.Compact + "=off", envnames.Flush + "=10ms", "CALLS_PAUSE=0.2"}, "", bin, "record", "--out", dir, "--",
		"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "3", py, script)
	if res.err != nil {
		t.Fatalf("record: %v\n%s%s", res.err, res.stdout, res.stderr)
	}
	run := readRun(t, dir)
	if len(run.Ranks) != 3 || len(run.Problems) != 0 {
		t.Fatalf("%d ranks, problems %v", len(run.Ranks), run.Problems)
	}
	sizes := pickledSizes(t, res.stdout)
	for _, rk := range run.Ranks {
		compareCalls(t, rk.Info.Rank, rk.Events, wantCalls(rk.Info.Rank, 3, sizes))
		if rk.Truncated != nil {
			t.Errorf("rank %d: %v", rk.Info.Rank, rk.Truncated)
		}
	}
	checkSpans(t, run)

	man := run.Manifest
	if man.Status != trace.StatusComplete || man.WorldSize != 3 || man.Launcher != "openmpi" || man.Codec != trace.Zstd {
		t.Errorf("manifest: status %s, world %d, launcher %s, codec %s", man.Status, man.WorldSize, man.Launcher, man.Codec)
	}
	if s := man.Source; s == nil || s.Format != "pmpi" || s.CollectiveMessages || !strings.HasPrefix(s.Tool, "Open MPI v") ||
		len(s.Missing) != 1 {
		t.Errorf("manifest source %+v", man.Source)
	}
	wantConfig := map[string]string{"mpi": "openmpi", "comms": "6", "comm world": "0-2", "comm world/split0:0": "2,0",
		"comm world/split0:1": "1", "comm world/split0:0/dup0": "2,0", "comm world/split0:1/dup0": "1", "comm world/dup1": "0-2"}
	for k, v := range wantConfig {
		if man.Config[k] != v {
			t.Errorf("manifest config %q = %q, want %q (config %v)", k, man.Config[k], v, man.Config)
		}
	}
	if man.Clock.Method != "same-host" || len(man.Ranks) != 3 || man.Ranks[2].File != "rank-00002.arrows" || man.Ranks[1].PID == 0 {
		t.Errorf("manifest clock %+v, ranks %+v", man.Clock, man.Ranks)
	}
	if want := []string{"commprof", "record", "--", "mpirun"}; len(man.Command) < 4 || strings.Join(man.Command[:4], " ") != strings.Join(want, " ") {
		t.Errorf("manifest command %q", man.Command)
	}
	checkArrowGo(t, run)
	checkArrowJS(t, dir, run, 3)
}

// checkArrowGo reads each stream of the run with Arrow Go's own IPC
// reader (commprof's decodes batches itself) and compares every row
// with what commprof's reader read.
func checkArrowGo(t *testing.T, run *trace.Run) {
	t.Helper()
	for _, rk := range run.Ranks {
		data, err := os.ReadFile(filepath.Join(run.Dir, rk.File))
		if err != nil {
			t.Fatal(err)
		}
		r, err := ipc.NewReader(bytes.NewReader(data), ipc.WithAllocator(memory.NewGoAllocator()))
		if err != nil {
			t.Fatalf("%s: %v", rk.File, err)
		}
		off := run.Manifest.Ranks[rk.Info.Rank].ClockOffsetNS
		row := 0
		for r.Next() {
			rec := r.Record()
			col := func(name string) arrow.Array { return rec.Column(rec.Schema().FieldIndices(name)[0]) }
			str := func(name string, i int) string {
				d := col(name).(*array.Dictionary)
				return d.Dictionary().(*array.String).Value(d.GetValueIndex(i))
			}
			for i := range int(rec.NumRows()) {
				e := rk.Events[row]
				got := trace.Event{Rank: col(trace.ColRank).(*array.Int32).Value(i), Name: str(trace.ColName, i),
					Start: col(trace.ColStart).(*array.Int64).Value(i) + off, Dur: col(trace.ColDur).(*array.Int64).Value(i),
					Bytes: col(trace.ColBytes).(*array.Int64).Value(i), Peer: col(trace.ColPeer).(*array.Int32).Value(i),
					Seq: col(trace.ColSeq).(*array.Int64).Value(i), Step: col(trace.ColStep).(*array.Int32).Value(i),
					Algo: str(trace.ColAlgo, i), DType: str(trace.ColDType, i), Root: col(trace.ColRoot).(*array.Int32).Value(i),
					Chunk: col(trace.ColChunk).(*array.Int32).Value(i), Comm: str(trace.ColComm, i),
					Wait: col(trace.ColWait).(*array.Int64).Value(i), Value: col(trace.ColValue).(*array.Float64).Value(i),
					Label: str(trace.ColLabel, i), Kind: e.Kind}
				if k := str(trace.ColKind, i); k != e.Kind.String() || got != e {
					t.Fatalf("%s row %d: Arrow Go read %s %+v, commprof %+v", rk.File, row, k, got, e)
				}
				row++
			}
		}
		if err := r.Err(); err != nil || row != len(rk.Events) {
			t.Errorf("%s: Arrow Go read %d rows, commprof %d: %v", rk.File, row, len(rk.Events), err)
		}
		r.Release()
	}
}

// checkArrowJS reads the run with Apache Arrow JS (tools/read-trace.mjs),
// an implementation independent of commprof's, and compares what it
// reads with the Go reader.
func checkArrowJS(t *testing.T, dir string, run *trace.Run, minBatches int) {
	t.Helper()
	node, err := exec.LookPath("node")
	tool, _ := filepath.Abs("../../tools/read-trace.mjs")
	if _, serr := os.Stat("../../node_modules/apache-arrow"); err != nil || serr != nil {
		need(t, "node or node_modules is missing (make web-deps)")
	}
	out, err := exec.Command(node, tool, dir).Output()
	if err != nil {
		t.Fatalf("arrow js: %v", err)
	}
	var js struct {
		Ranks []struct {
			File     string            `json:"file"`
			Rows     int               `json:"rows"`
			Batches  int               `json:"batches"`
			Metadata map[string]string `json:"metadata"`
			Kinds    map[string]int    `json:"kinds"`
			Bytes    string            `json:"bytes"`
			First    map[string]any    `json:"first"`
			Last     map[string]any    `json:"last"`
		} `json:"ranks"`
	}
	if err := json.Unmarshal(out, &js); err != nil {
		t.Fatal(err)
	}
	if len(js.Ranks) != len(run.Ranks) {
		t.Fatalf("arrow js saw %d ranks, commprof %d", len(js.Ranks), len(run.Ranks))
	}
	for i, jr := range js.Ranks {
		rk := run.Ranks[i]
		kinds := map[string]int{}
		var bytes int64
		for _, e := range rk.Events {
			kinds[e.Kind.String()]++
			bytes += e.Bytes
		}
		if jr.Rows != len(rk.Events) || fmt.Sprint(jr.Kinds) != fmt.Sprint(kinds) || jr.Bytes != strconv.FormatInt(bytes, 10) {
			t.Errorf("%s: arrow js %d rows %v %s bytes; commprof %d %v %d", jr.File, jr.Rows, jr.Kinds, jr.Bytes, len(rk.Events), kinds, bytes)
		}
		if jr.Batches < minBatches {
			t.Errorf("%s: %d batches, want at least %d", jr.File, jr.Batches, minBatches)
		}
		if jr.Metadata[trace.MetaRank] != strconv.Itoa(rk.Info.Rank) || jr.Metadata[trace.MetaHost] != rk.Info.Host ||
			jr.Metadata[trace.MetaPID] != strconv.Itoa(rk.Info.PID) || jr.Metadata[trace.MetaRunID] != rk.Info.RunID {
			t.Errorf("%s: metadata %v, commprof %+v", jr.File, jr.Metadata, rk.Info)
		}
		for _, c := range []struct {
			row map[string]any
			e   trace.Event
		}{{jr.First, rk.Events[0]}, {jr.Last, rk.Events[len(rk.Events)-1]}} {
			// Arrow JS sees times as written; the Go reader moved them onto rank 0's clock.
			start := c.e.Start - run.Manifest.Ranks[rk.Info.Rank].ClockOffsetNS
			if c.row["kind"] != c.e.Kind.String() || c.row["name"] != c.e.Name || c.row["comm"] != c.e.Comm ||
				c.row["start_ns"] != strconv.FormatInt(start, 10) || c.row["label"] != "" {
				t.Errorf("%s: row %v, commprof %+v", jr.File, c.row, c.e)
			}
		}
	}
}
