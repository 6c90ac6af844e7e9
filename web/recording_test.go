package web

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/trace"
)

const evilName = "<script>alert(1)</script>"

// stepEvents returns rank r's events of steps [from, to) of a data-parallel
// job of world ranks: a step span, forward and backward compute, and a
// ring allreduce of 1 MiB with its sends and receives.
func stepEvents(r, world int, from, to int32) []trace.Event {
	var evs []trace.Event
	for step := from; step < to; step++ {
		t0 := int64(step) * 2_000_000
		late := int64(0)
		if r == world-1 {
			late = 40_000 // the last rank is a straggler
		}
		evs = append(evs,
			trace.Event{Rank: int32(r), Kind: trace.KindStep, Name: "step", Start: t0, Dur: 1_900_000, Peer: -1, Seq: -1, Step: step, Root: -1, Chunk: -1},
			trace.Event{Rank: int32(r), Kind: trace.KindCompute, Name: "forward", Start: t0, Dur: 500_000, Peer: -1, Seq: -1, Step: step, Root: -1, Chunk: -1},
			trace.Event{Rank: int32(r), Kind: trace.KindCompute, Name: "backward", Start: t0 + 500_000, Dur: 800_000, Peer: -1, Seq: -1, Step: step, Root: -1, Chunk: -1})
		cs := t0 + 1_000_000 + late
		evs = append(evs, trace.Event{Rank: int32(r), Kind: trace.KindCollective, Name: "allreduce", Start: cs, Dur: 600_000 - late, Bytes: 1 << 20,
			Peer: -1, Seq: int64(step), Step: step, Algo: "ring", DType: "float32", Root: -1, Chunk: -1, Comm: "world"})
		for k := range int32(2 * (world - 1)) {
			for _, kind := range []trace.Kind{trace.KindSend, trace.KindRecv} {
				peer := (r + 1) % world
				if kind == trace.KindRecv {
					peer = (r + world - 1) % world
				}
				evs = append(evs, trace.Event{Rank: int32(r), Kind: kind, Name: "allreduce", Start: cs + 50_000 + int64(k)*100_000, Dur: 80_000,
					Bytes: 1 << 20 / int64(world), Peer: int32(peer), Seq: int64(step), Step: step, Algo: "ring", DType: "float32", Root: -1, Chunk: k, Comm: "world"})
			}
		}
	}
	return evs
}

// recording is a run being written: its streams stay open until finish.
type recording struct {
	t     *testing.T
	rd    *rundir.Dir // held while the run is recorded, as a recorder holds it
	dir   string
	world int
	steps int32
	m     *trace.Manifest
	files []*os.File
	ws    []*trace.Writer
}

// startRun starts a run of world ranks in dir with manifest m (its status
// "running") and writes steps steps on every rank.
func startRun(t *testing.T, dir string, world int, m trace.Manifest, steps int32) *recording {
	t.Helper()
	rd, err := rundir.Take(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	m.FormatVersion, m.WorldSize, m.Status = trace.FormatVersion, world, trace.StatusRunning
	if m.Start.IsZero() {
		m.Start = time.Now().Add(-90 * time.Second)
	}
	rec := &recording{t: t, rd: rd, dir: dir, world: world, m: &m}
	for r := range world {
		f, err := os.Create(filepath.Join(dir, trace.RankFile(r)))
		if err != nil {
			t.Fatal(err)
		}
		w, err := trace.NewWriter(f, trace.RankInfo{Rank: r, WorldSize: world, Host: "node0"}, trace.WriterOptions{Codec: trace.None})
		if err != nil {
			t.Fatal(err)
		}
		rec.files, rec.ws = append(rec.files, f), append(rec.ws, w)
		m.Ranks = append(m.Ranks, trace.RankEntry{Rank: r, Host: "node0", File: trace.RankFile(r)})
	}
	if err := trace.WriteManifest(dir, rec.m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, f := range rec.files {
			f.Close()
		}
		rd.Release()
	})
	rec.add(steps)
	return rec
}

// add writes the next n steps, one batch per rank.
func (rec *recording) add(n int32) {
	rec.t.Helper()
	for r, w := range rec.ws {
		if err := w.Write(stepEvents(r, rec.world, rec.steps, rec.steps+n)); err != nil {
			rec.t.Fatal(err)
		}
	}
	rec.steps += n
}

// events is the number of events written so far.
func (rec *recording) events() int64 {
	n := int64(0)
	for _, w := range rec.ws {
		n += w.Events()
	}
	return n
}

// finish closes the streams and writes the manifest with status.
func (rec *recording) finish(status string) {
	rec.t.Helper()
	for i, w := range rec.ws {
		if err := w.Close(); err != nil {
			rec.t.Fatal(err)
		}
		if err := rec.files[i].Close(); err != nil {
			rec.t.Fatal(err)
		}
	}
	rec.m.Status, rec.m.End = status, rec.m.Start.Add(time.Minute)
	if err := trace.WriteManifest(rec.dir, rec.m); err != nil {
		rec.t.Fatal(err)
	}
	rec.rd.Release()
}

// abandon leaves the run as a killed recorder does: its streams cut
// where they are, run.json saying running, no recorder.
func (rec *recording) abandon() {
	rec.t.Helper()
	for _, f := range rec.files {
		f.Close()
	}
	rec.rd.Release()
}

// writeRun writes a finished run.
func writeRun(t *testing.T, dir string, world int, m trace.Manifest, steps int32) {
	t.Helper()
	startRun(t, dir, world, m, steps).finish(trace.StatusComplete)
}
