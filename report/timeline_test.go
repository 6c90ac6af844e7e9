package report

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/analyze/analyzetest"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/trace"
)

// timelineOf builds the timeline of a run held in memory, fed batch by
// batch as a read of its directory would feed it.
func timelineOf(s *analyze.Summary, run *trace.Run, opt TimelineOptions) *Timeline {
	tb := newTimeline(s, opt)
	for _, rk := range run.Ranks {
		tr := tb.rank(rk.Info.Rank)
		for _, b := range analyzetest.Batches(rk.Events) {
			tr.addBatch(b)
		}
	}
	return tb.finalize()
}

// ringRun is a 3-rank ring allreduce of 300 bytes: every rank sends 4
// messages of 100 bytes to the next and receives 4 from the previous,
// each receive waiting 30 ns for its sender.
func ringRun() *trace.Run {
	ev := func(k trace.Kind, rank, peer int32, start, dur, bytes, wait int64) trace.Event {
		return trace.Event{Rank: rank, Kind: k, Name: "allreduce", Start: start, Dur: dur, Bytes: bytes, Peer: peer, Seq: 0, Step: -1,
			Algo: "ring", Root: -1, Chunk: -1, Comm: "world", Wait: wait}
	}
	run := &trace.Run{Dir: "hand", Manifest: &trace.Manifest{Name: "hand", WorldSize: 3, Config: map[string]string{}}}
	for r := range int32(3) {
		next, prev := (r+1)%3, (r+2)%3
		rk := trace.Rank{Info: trace.RankInfo{Rank: int(r), WorldSize: 3, Host: "h"}}
		rk.Events = append(rk.Events, ev(trace.KindCollective, r, -1, 0, 1000, 300, 0))
		for k := range int64(4) {
			rk.Events = append(rk.Events, ev(trace.KindSend, r, next, 10+k*100, 20, 100, 0), ev(trace.KindRecv, r, prev, 10+k*100, 50, 100, 30))
		}
		run.Ranks = append(run.Ranks, rk)
	}
	return run
}

func TestTimeline(t *testing.T) {
	run := ringRun()
	s := analyzetest.Summarize(run)
	td := timelineOf(s, run, TimelineOptions{Bins: 10})
	// 3 ranks x (1 collective + 4 sends + 4 recvs); every send has its recv.
	if len(td.Events.Rank) != 27 || td.Truncated != 0 || len(td.Links) != 12 || len(td.Windows) != 1 {
		t.Fatalf("timeline: %d events, %d truncated, %d links, windows %v", len(td.Events.Rank), td.Truncated, len(td.Links), td.Windows)
	}
	// Starts are deltas within each rank and lane: summing them back gives
	// the events' starts, in order.
	prev, row := int64(0), [2]int32{-1, -1}
	for i := range td.Events.Rank {
		r := [2]int32{td.Events.Rank[i], int32(td.Events.Lane[i])}
		if r != row {
			row, prev = r, 0
		}
		if td.Events.Start[i] < 0 {
			t.Fatalf("event %d starts before the previous one of its lane", i)
		}
		prev += td.Events.Start[i]
	}
	for _, l := range td.Links {
		s, r := l[0], l[1]
		if td.Lanes[td.Events.Lane[s]] != "send" || td.Lanes[td.Events.Lane[r]] != "recv" ||
			td.Events.Peer[s] != td.Events.Rank[r] || td.Events.Peer[r] != td.Events.Rank[s] {
			t.Fatalf("link %v does not join a send to its receive", l)
		}
	}
	// The collective lane is busy for the whole run on every rank.
	for _, row := range td.Bins.Rows {
		if td.Lanes[row.Lane] == "collective" && (row.Busy[0] != 1000 || td.Names[row.Name[0]] != "allreduce") {
			t.Fatalf("collective bins of rank %d: %v %v", row.Rank, row.Busy, row.Name)
		}
	}
	// A window asked for keeps the events that overlap it: the messages
	// start at 10, 110, 210, 310 and the collectives span the run.
	w := timelineOf(s, run, TimelineOptions{Bins: 10, Window: [2]int64{100, 200}})
	if len(w.Windows) != 1 || w.Windows[0] != [2]int64{100, 200} || len(w.Events.Rank) != 3*(1+2) {
		t.Fatalf("window [100,200): windows %v, %d events", w.Windows, len(w.Events.Rank))
	}
	// A detail budget smaller than the run keeps fewer events in windows.
	small := timelineOf(s, run, TimelineOptions{Bins: 10, Detail: 6})
	if n := len(small.Events.Rank); n == 0 || n > 6 || small.Truncated != int64(27-n) {
		t.Fatalf("budget 6: %d events, %d truncated, windows %v", n, small.Truncated, small.Windows)
	}
}

// writeSteps writes a 4-rank run of steps steps to dir: each step of each
// rank a step, forward and backward compute, and a ring allreduce with its
// sends and receives, plus a mark the timeline does not draw.
func writeSteps(t *testing.T, dir string, steps int32) {
	t.Helper()
	const world = 4
	m := &trace.Manifest{FormatVersion: trace.FormatVersion, Name: "steps", WorldSize: world, Status: trace.StatusComplete}
	for r := range int32(world) {
		var evs []trace.Event
		ev := func(k trace.Kind, name string, start, dur int64, step int32) trace.Event {
			return trace.Event{Rank: r, Kind: k, Name: name, Start: start, Dur: dur, Peer: -1, Seq: -1, Step: step, Root: -1, Chunk: -1}
		}
		for s := range steps {
			t0 := int64(s)*2_000_000 + int64(r)*3000 + int64(s%7)*10_000
			evs = append(evs, ev(trace.KindStep, "step", t0, 1_900_000, s), ev(trace.KindCompute, "forward", t0, 500_000, s),
				ev(trace.KindCompute, "backward", t0+500_000, 800_000, s), ev(trace.KindMark, "epoch", t0, 0, s))
			c := ev(trace.KindCollective, "allreduce", t0+1_300_000, 500_000, s)
			c.Bytes, c.Seq, c.Algo, c.Comm = 1<<20, int64(s), "ring", "world"
			evs = append(evs, c)
			for k := range int32(2 * (world - 1)) {
				for _, kind := range []trace.Kind{trace.KindSend, trace.KindRecv} {
					e := ev(kind, "allreduce", c.Start+int64(k)*80_000, 60_000, s)
					e.Peer = (r + 1) % world
					if kind == trace.KindRecv {
						e.Peer, e.Wait = (r+world-1)%world, 5000
					}
					e.Bytes, e.Seq, e.Algo, e.Comm, e.Chunk = 1<<18, int64(s), "ring", "world", k
					evs = append(evs, e)
				}
			}
		}
		f, err := os.Create(filepath.Join(dir, trace.RankFile(int(r))))
		if err != nil {
			t.Fatal(err)
		}
		w, err := trace.NewWriter(f, trace.RankInfo{Rank: int(r), WorldSize: world, Host: "h"}, trace.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for len(evs) > 0 {
			n := min(500, len(evs))
			if err := w.Write(evs[:n]); err != nil {
				t.Fatal(err)
			}
			evs = evs[n:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		m.Ranks = append(m.Ranks, trace.RankEntry{Rank: int(r), Host: "h", File: trace.RankFile(int(r))})
	}
	if err := trace.WriteManifest(dir, m); err != nil {
		t.Fatal(err)
	}
}

// The timeline built from the events load.Load kept while it summarized
// the run is the one a second read of the run builds, and so is the one
// built when they did not fit the budget.
func TestBuildTimelineEqualsSecondRead(t *testing.T) {
	dir := t.TempDir()
	writeSteps(t, dir, 60) // 4 ranks × 60 steps × 17 events
	ctx := context.Background()
	for _, opt := range []TimelineOptions{{}, {Detail: 400}, {Detail: 400, Bins: 37}, {Window: [2]int64{30_000_000, 31_000_000}}} {
		s, err := load.Summary(ctx, dir)
		if err != nil {
			t.Fatal(err)
		}
		want, err := ReadTimeline(ctx, dir, s, opt)
		if err != nil {
			t.Fatal(err)
		}
		wj, _ := json.Marshal(want)
		if opt.Detail == 400 && (want.Truncated == 0 || len(want.Windows) < 2) {
			t.Fatalf("%+v: %d truncated, windows %v: the test wants windows of detail", opt, want.Truncated, want.Windows)
		}
		for _, budget := range []int64{0, 1000} {
			run, err := load.Load(ctx, dir, TimelineKeep(budget))
			if err != nil {
				t.Fatal(err)
			}
			if run.Reread() != (budget == 1000) {
				t.Fatalf("budget %d: reread %v", budget, run.Reread())
			}
			got, err := BuildTimeline(ctx, run, opt)
			if err != nil {
				t.Fatal(err)
			}
			if gj, _ := json.Marshal(got); string(gj) != string(wj) {
				t.Fatalf("%+v, budget %d: the timeline differs from a second read's:\n%s\nvs\n%s", opt, budget, gj, wj)
			}
		}
	}
}

// A window of detail read with the timeline's base (only the batches that
// hold the window's events, their extents known or read) is the window
// ReadTimeline builds from every event: the same JSON, for windows inside
// a step, across many, covering the run, before and beyond it, and small
// enough budgets of detail that the window shrinks.
func TestReadTimelineWindowIsReadTimeline(t *testing.T) {
	dir := t.TempDir()
	writeSteps(t, dir, 600) // 4 ranks × 10,200 events, in batches of 500
	ctx := context.Background()
	s, err := load.Summary(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	full, err := ReadTimeline(ctx, dir, s, TimelineOptions{Detail: 1})
	if err != nil {
		t.Fatal(err)
	}
	base := full.Base()
	if len(base.spans) != 4 || len(base.spans[0]) != 21 {
		t.Fatalf("the base holds the extents of %d streams' batches (%d of the first's), want 4 streams of 21", len(base.spans), len(base.spans[0]))
	}
	unknown := *base
	unknown.spans = nil // every batch's times decoded to tell
	span := s.Run.SpanNS
	for _, w := range [][2]int64{{0, 1}, {1_000_000, 1_000_001}, {30_000_000, 31_000_000}, {123_456_789, 500_000_000},
		{0, span + 1}, {span - 10, span + 10}, {span + 10, span + 20}} {
		for _, detail := range []int{200, 200_000} {
			opt := TimelineOptions{Detail: detail, Window: w}
			want, err := ReadTimeline(ctx, dir, s, opt)
			if err != nil {
				t.Fatal(err)
			}
			wj, _ := json.Marshal(want)
			for _, b := range []*TimelineBase{base, &unknown} {
				got, err := ReadTimelineWindow(ctx, dir, s, opt, b)
				if err != nil {
					t.Fatal(err)
				}
				if gj, _ := json.Marshal(got); string(gj) != string(wj) {
					t.Fatalf("window %v, detail %d, extents known %v: differs from ReadTimeline's:\n%.600s\nvs\n%.600s", w, detail, b.spans != nil, gj, wj)
				}
			}
		}
	}
	if _, err := ReadTimelineWindow(ctx, dir, s, TimelineOptions{Bins: 7, Window: [2]int64{0, 10}}, base); err == nil {
		t.Errorf("a base of %d bins answered a window of 7", base.bins)
	}
}
