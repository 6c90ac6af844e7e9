package analyze

import (
	"slices"
	"strings"
	"testing"

	"github.com/commprof/commprof/trace"
)

// The PMPI library's events (interpose/pmpi): a non-blocking call is an
// operation event from its start to its completion and a wait event, a
// copy of it, from the completion call's start to the same end.

// waitFor is the wait event of e, from start to e's end.
func waitFor(e trace.Event, start int64) trace.Event {
	w := e
	w.Kind, w.Start, w.Dur = trace.KindWait, start, e.End()-start
	return w
}

// TestWaitsMatchTheirOwnCall: a message's wait carries its tag in seq, so
// an Irecv with tag 5 waited for on the world must not make the world's
// collective number 5 non-blocking. Here that allreduce blocks the rank
// for its whole 100 ns, and the message only in its 50 ns wait.
func TestWaitsMatchTheirOwnCall(t *testing.T) {
	irecv := message(trace.KindRecv, 0, 1, PointToPoint, "", 5, 300, 100, 8, 0)
	send := message(trace.KindSend, 1, 0, PointToPoint, "", 5, 300, 10, 8, 0)
	run := runOf(2,
		coll(0, "allreduce", "", 5, 100, 100, 8), coll(1, "allreduce", "", 5, 100, 100, 8),
		irecv, waitFor(irecv, 350), send)
	r := Summarize(run).Ranks[0]
	if r.CommNS != 200 || r.ExposedNS != 150 || r.OverlappedNS != 50 {
		t.Errorf("rank 0: comm %d, exposed %d, overlapped %d ns; want 200, 150 (the allreduce and the wait), 50",
			r.CommNS, r.ExposedNS, r.OverlappedNS)
	}
}

// TestNonBlockingMessagesBlockOnlyInTheirWaits: an Isend the program
// waited for the last 20 of its 100 ns blocked it for those 20 (and
// another, like it but for its times, for its last 10), a blocking Recv
// for its whole 50.
func TestNonBlockingMessagesBlockOnlyInTheirWaits(t *testing.T) {
	isend := message(trace.KindSend, 0, 1, PointToPoint, "", 7, 0, 100, 64, 0)
	again := message(trace.KindSend, 0, 1, PointToPoint, "", 7, 400, 100, 64, 0)
	recv := message(trace.KindRecv, 0, 1, PointToPoint, "", 8, 200, 50, 64, 0)
	run := runOf(2, isend, waitFor(isend, 80), recv, again, waitFor(again, 490),
		message(trace.KindRecv, 1, 0, PointToPoint, "", 7, 0, 10, 64, 0),
		message(trace.KindRecv, 1, 0, PointToPoint, "", 7, 400, 10, 64, 0),
		message(trace.KindSend, 1, 0, PointToPoint, "", 8, 200, 10, 64, 0))
	r := Summarize(run).Ranks[0]
	if r.CommNS != 250 || r.ExposedNS != 80 || r.OverlappedNS != 170 {
		t.Errorf("rank 0: comm %d, exposed %d, overlapped %d ns; want 250, 80 (20 + 50 + 10), 170",
			r.CommNS, r.ExposedNS, r.OverlappedNS)
	}
}

// TestPMPIRunsDoNotKnowCompute: a run the PMPI library recorded has no
// compute and no receive's wait for its first byte; its summary says
// they are unknown, and its findings do not call the receives' waiting
// 0%. The same events from another source make that finding.
func TestPMPIRunsDoNotKnowCompute(t *testing.T) {
	var evs []trace.Event
	for i, from := range []int32{1, 2, 1, 2} {
		start := int64(i) * 1000
		evs = append(evs, message(trace.KindRecv, 0, from, PointToPoint, "", 3, start, 500, 1<<20, 0),
			message(trace.KindSend, from, 0, PointToPoint, "", 3, start, 100, 1<<20, 0))
	}
	waiting := func(s *Summary) bool {
		return slices.ContainsFunc(s.Findings, func(f string) bool { return strings.Contains(f, "wait for their senders") })
	}
	pm := runOf(3, evs...)
	pm.Manifest.Source = &trace.Source{Format: "pmpi"}
	s := Summarize(pm)
	if !s.IsUnknown("compute") || !s.IsUnknown("recv_wait") || waiting(s) {
		t.Errorf("PMPI run: unknown %q, findings %q", s.Unknown, s.Findings)
	}
	other := Summarize(runOf(3, evs...))
	if other.IsUnknown("compute") || other.IsUnknown("recv_wait") || !waiting(other) {
		t.Errorf("run of no source: unknown %q, findings %q", other.Unknown, other.Findings)
	}
}

// TestCollectiveWaitsMarkTheirCalls: a non-blocking collective blocked
// its rank only while the program waited on it, wherever the wait's event
// comes: just after the call's (as the PMPI library writes them: the call
// is marked as it is read, nothing kept aside), several events later, or
// before it. Each rank is blocked 20 of each call's 100 us: the exposed
// communication is 20 us a call.
func TestCollectiveWaitsMarkTheirCalls(t *testing.T) {
	const n = 50
	build := func(where string) *trace.Run {
		var evs []trace.Event
		for r := range int32(2) {
			var mine, late []trace.Event
			for i := range int64(n) {
				t0 := i * 1_000_000
				c := coll(r, "iallreduce", "ring", i, t0, 100_000, 4096)
				w := waitFor(c, t0+80_000)
				switch where {
				case "after":
					mine = append(mine, c, w)
				case "later":
					mine = append(mine, c)
					late = append(late, w)
					if len(late) == 3 {
						mine, late = append(mine, late...), nil
					}
				case "before":
					mine = append(mine, w, c)
				}
			}
			evs = append(append(evs, mine...), late...)
		}
		return runOf(2, evs...)
	}
	for _, where := range []string{"after", "later", "before"} {
		s := fed(build(where), 0, 0, 0)
		kept := 0
		for _, rs := range s.ranks {
			kept += len(rs.waited)
		}
		if (kept == 0) != (where == "after") {
			t.Errorf("waits %s their calls: %d kept aside to mark at the merge", where, kept)
		}
		sum := s.Finalize()
		for _, r := range sum.Ranks {
			if r.ExposedNS != n*20_000 || r.CommNS != n*100_000 {
				t.Errorf("waits %s their calls: rank %d exposed %d of %d ns, want %d of %d", where, r.Rank, r.ExposedNS, r.CommNS, n*20_000, n*100_000)
			}
		}
	}
}
