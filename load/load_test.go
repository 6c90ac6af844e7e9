package load

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/analyze/analyzetest"
	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/trace"
)

// writeRun writes a 4-rank run of ring allreduces with steps, compute
// spans and a clock offset on rank 3, in batches of 100 events.
func writeRun(t testing.TB, dir string) { writeSteps(t, dir, 50, 100) }

// writeSteps writes steps steps per rank (15 events each) in batches of
// batch events.
func writeSteps(t testing.TB, dir string, steps int32, batch int) {
	t.Helper()
	const world = 4
	rng := rand.New(rand.NewPCG(1, 2))
	m := &trace.Manifest{FormatVersion: trace.FormatVersion, Name: "streamed", WorldSize: world, Status: trace.StatusComplete,
		Config: map[string]string{"batch_size": "16"}}
	for r := range world {
		var evs []trace.Event
		t0 := int64(0)
		for step := range steps {
			evs = append(evs, trace.Event{Rank: int32(r), Kind: trace.KindStep, Name: "step", Start: t0, Dur: 1_000_000, Peer: -1, Seq: -1, Step: step, Root: -1, Chunk: -1})
			evs = append(evs, trace.Event{Rank: int32(r), Kind: trace.KindCompute, Name: "backward", Start: t0, Dur: 600_000, Peer: -1, Seq: -1, Step: step, Root: -1, Chunk: -1})
			cs := t0 + 400_000 + rng.Int64N(50_000)
			evs = append(evs, trace.Event{Rank: int32(r), Kind: trace.KindCollective, Name: "allreduce", Start: cs, Dur: 300_000, Bytes: 1 << 20,
				Peer: -1, Seq: int64(step), Step: step, Algo: "ring", DType: "float32", Root: -1, Chunk: -1, Comm: "world"})
			for k := range int32(2 * (world - 1)) {
				for _, kind := range []trace.Kind{trace.KindSend, trace.KindRecv} {
					peer := (r + 1) % world
					if kind == trace.KindRecv {
						peer = (r + world - 1) % world
					}
					evs = append(evs, trace.Event{Rank: int32(r), Kind: kind, Name: "allreduce", Start: cs + int64(k)*40_000, Dur: 30_000 + rng.Int64N(5000),
						Bytes: 1 << 18, Peer: int32(peer), Seq: int64(step), Step: step, Algo: "ring", DType: "float32", Root: -1, Chunk: k, Comm: "world", Wait: 1000})
				}
			}
			t0 += 1_000_000
		}
		off := int64(0)
		if r == 3 {
			off = 5000
			for i := range evs {
				evs[i].Start -= off
			}
		}
		f, err := os.Create(filepath.Join(dir, trace.RankFile(r)))
		if err != nil {
			t.Fatal(err)
		}
		w, err := trace.NewWriter(f, trace.RankInfo{Rank: r, WorldSize: world, Host: "h", ClockOffsetNS: off}, trace.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for len(evs) > 0 {
			n := min(batch, len(evs))
			if err := w.Write(evs[:n]); err != nil {
				t.Fatal(err)
			}
			evs = evs[n:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		m.Ranks = append(m.Ranks, trace.RankEntry{Rank: r, Host: "h", File: trace.RankFile(r), ClockOffsetNS: off})
	}
	if err := trace.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
}

// Streaming a run batch by batch gives the same summary as reading it
// whole, clock corrections included.
func TestStreamedEqualsInMemory(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir)
	got, err := Summary(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := analyzetest.Summarize(run)
	gj, _ := json.MarshalIndent(got, "", " ")
	wj, _ := json.MarshalIndent(want, "", " ")
	if string(gj) != string(wj) {
		t.Fatalf("streamed summary differs from the in-memory one:\n%s\nvs\n%s", gj, wj)
	}
	if got.Run.Events != int64(run.NumEvents()) || got.StepSummary.Steps != 50 || got.Patterns[0].Pattern != analyze.PatternRing {
		t.Fatalf("summary: %d events, %d steps, patterns %+v", got.Run.Events, got.StepSummary.Steps, got.Patterns)
	}
	// Rank 3's clock offset is applied: arrival offsets stay under 50µs.
	if got.Skew.Dist.Max >= 50_000 {
		t.Fatalf("skew max %d: the clock offset was not applied", got.Skew.Dist.Max)
	}
}

func TestCutStreamIsAProblemNotAnError(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir)
	p := filepath.Join(dir, trace.RankFile(2))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b[:len(b)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Summary(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Problems) != 1 || !strings.Contains(s.Problems[0], "rank 2") || !strings.Contains(s.Problems[0], "cut") {
		t.Fatalf("problems: %q", s.Problems)
	}
	if !s.Ranks[2].Truncated || s.Ranks[2].Events == 0 || s.Ranks[1].Truncated {
		t.Fatalf("ranks: %+v", s.Ranks)
	}
}

func TestNotARun(t *testing.T) {
	dir := t.TempDir()
	if _, err := Summary(context.Background(), dir); !errors.Is(err, trace.ErrNotTrace) {
		t.Fatalf("empty dir: %v", err)
	}
	if _, err := Summary(context.Background(), filepath.Join(dir, "nosuch")); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Fatalf("missing dir: %v", err)
	}
	writeRun(t, dir)
	if err := os.WriteFile(filepath.Join(dir, trace.RankFile(1)), []byte("not arrow at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	// One foreign stream is left out, and said to be; the others are read.
	s, err := Summary(context.Background(), dir)
	if err != nil {
		t.Fatalf("one foreign stream: %v", err)
	}
	if len(s.Ranks) == 0 || slices.ContainsFunc(s.Ranks, func(r analyze.RankStats) bool { return r.Rank == 1 }) {
		t.Errorf("ranks %+v: want every rank but 1", s.Ranks)
	}
	if !slices.ContainsFunc(s.Problems, func(p string) bool {
		return strings.Contains(p, trace.RankFile(1)) && strings.Contains(p, "not a commprof trace") && strings.Contains(p, "ignored")
	}) {
		t.Errorf("problems %q: none names the foreign stream", s.Problems)
	}
	// A run none of whose streams is a trace is refused.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".arrows") {
			if err := os.WriteFile(filepath.Join(dir, e.Name()), []byte("not arrow at all"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := Summary(context.Background(), dir); !errors.Is(err, trace.ErrNotTrace) || !strings.Contains(err.Error(), trace.RankFile(1)) {
		t.Fatalf("only foreign streams: %v", err)
	}
}

func TestCancelled(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Summary(ctx, dir); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// BenchmarkSummary measures a whole summary of a 4-rank run of 2.4 M
// events (zstd, batches of 16384 as the recorder writes them), from the
// files through Finalize.
func BenchmarkSummary(b *testing.B) {
	dir := b.TempDir()
	writeSteps(b, dir, 40_000, 16384)
	b.ResetTimer()
	var events int64
	for range b.N {
		s, err := Summary(context.Background(), dir)
		if err != nil {
			b.Fatal(err)
		}
		events += s.Run.Events
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(events), "ns/event")
}

// BenchmarkScan reads the same run without summarizing it: the reader's
// own speed, which bounds BenchmarkSummary's. "all" decodes every column,
// "summary" the columns the summarizer reads.
func BenchmarkScan(b *testing.B) {
	dir := b.TempDir()
	writeSteps(b, dir, 40_000, 16384)
	rf, err := trace.OpenRun(dir)
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		cols []string
	}{{"all", nil}, {"summary", analyze.SummaryColumns()}} {
		b.Run(bc.name, func(b *testing.B) {
			var events atomic.Int64
			for range b.N {
				if _, _, err := scan(context.Background(), rf, bc.cols, func(_ int, _ trace.RankInfo, bt *trace.Batch) { events.Add(int64(bt.Len)) }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(events.Load())/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// A run whose run.json says running is shown running while a process
// records into it, and abandoned once that process is killed; a reader
// changes nothing in the run, not even what the killed recorder left
// (its reserve of space, its lock files).
func TestAbandonedRun(t *testing.T) {
	dir := t.TempDir()
	writeRun(t, dir)
	if err := rundir.Update(dir, func(m *trace.Manifest) (*trace.Manifest, error) {
		m.Status = trace.StatusRunning
		return m, nil
	}); err != nil {
		t.Fatal(err)
	}
	// A child process holds the run as a recorder does.
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRecorder$")
	cmd.Env = append(os.Environ(), "LOAD_HELPER="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "claimed\n" {
		t.Fatalf("helper: %q %v", line, err)
	}
	s, err := Summary(context.Background(), dir)
	if err != nil || s.Run.Status != trace.StatusRunning {
		t.Fatalf("a run being recorded: %v, status %q", err, s.Run.Status)
	}
	left := func() []string {
		var out []string
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".commprof-") {
				out = append(out, e.Name())
			}
		}
		return out
	}
	if len(left()) == 0 {
		t.Fatal("a recorder that keeps no files: nothing to test")
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if len(left()) == 0 {
		t.Fatal("the killed recorder left nothing: nothing to test")
	}
	before := left()
	s, err = Summary(context.Background(), dir)
	if err != nil || s.Run.Status != trace.StatusAbandoned {
		t.Fatalf("a run whose recorder was killed: %v, status %q", err, s.Run.Status)
	}
	if l := left(); !slices.Equal(l, before) {
		t.Errorf("the reader changed the recorder's files from %v to %v", before, l)
	}
	if m, err := trace.ReadManifest(dir); err != nil || m.Status != trace.StatusRunning {
		t.Errorf("the reader changed run.json: %v %+v", err, m)
	}
}

// TestHelperRecorder is the child of TestAbandonedRun: it holds the run
// and waits to be killed.
func TestHelperRecorder(t *testing.T) {
	dir := os.Getenv("LOAD_HELPER")
	if dir == "" {
		t.Skip("run by TestAbandonedRun")
	}
	if rundir.Claim(dir) == nil {
		t.Fatal("could not claim")
	}
	os.Stdout.WriteString("claimed\n")
	// Held until killed. A timer keeps the runtime from taking a
	// process whose goroutines all wait on nothing for a deadlock.
	time.Sleep(time.Minute)
}
