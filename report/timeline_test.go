package report

import (
	"testing"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/analyzetest"
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
