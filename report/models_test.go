package report

import (
	"strings"
	"testing"
	"time"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/trace"
)

// A live page's elapsed time runs until now while the run records, until
// its end once it ended, and until its last write when its recorder is
// gone, which the page says.
func TestNewLive(t *testing.T) {
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	m := &trace.Manifest{Name: "train", WorldSize: 2, Start: start, End: start.Add(7 * time.Second),
		Ranks: []trace.RankEntry{{Rank: 0, Host: "a"}, {Rank: 1, Host: "b"}}}
	src := func(status string) LiveSource {
		return LiveSource{Name: "sw/r1", Now: start.Add(10 * time.Second), Manifest: m, Status: status, LastWrite: start.Add(3 * time.Second),
			Streams: []trace.StreamFile{{Rank: 1, Bytes: 100}, {Rank: 0, Bytes: 50}},
			Summary: &analyze.Summary{Run: analyze.RunInfo{Events: 9, SpanNS: 42}, Findings: []string{"f"},
				Ranks: []analyze.RankStats{{Rank: 0, Events: 4}, {Rank: 1, Events: 5}}}}
	}
	for status, want := range map[string]time.Duration{trace.StatusRunning: 10 * time.Second, trace.StatusComplete: 7 * time.Second,
		trace.StatusAbandoned: 3 * time.Second} {
		l := NewLive(src(status))
		if l.ElapsedNS != want.Nanoseconds() || l.Running != (status == trace.StatusRunning) {
			t.Errorf("%s: elapsed %v, running %v; want %v", status, time.Duration(l.ElapsedNS), l.Running, want)
		}
		if (status == trace.StatusAbandoned) != strings.Contains(l.Error, "recorder is gone") {
			t.Errorf("%s: error %q", status, l.Error)
		}
		if len(l.Ranks) != 2 || l.Ranks[0].Host != "a" || l.Ranks[0].Bytes != 50 || l.Ranks[1].Events != 5 || l.DiskBytes != 150 ||
			l.Events != 9 || l.Title != "train" || l.Updated != "2025-01-02T03:04:15Z" {
			t.Errorf("%s: %+v", status, l)
		}
	}
	// Nothing read yet: named by its id, not running.
	if l := NewLive(LiveSource{Name: "x", Problem: "p"}); l.Title != "x" || l.Running || l.Problem != "p" || l.Ranks == nil || l.Findings == nil {
		t.Errorf("nothing read: %+v", l)
	}
}
