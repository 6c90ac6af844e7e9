package web

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/commprof/commprof/report"
	"github.com/commprof/commprof/trace"
)

func TestDensityShrink(t *testing.T) {
	// 10 bins of 100 ns: 10 events in each, 500 in bin 7.
	d := &density{width: 100, counts: []int64{10, 10, 10, 10, 10, 10, 10, 500, 10, 10}}
	for _, tc := range []struct {
		from, to, limit int64
		want            [2]int64
	}{
		{0, 1000, 1000, [2]int64{0, 1000}},  // fits: as asked
		{150, 420, 40, [2]int64{150, 420}},  // 4 bins touched, 40 events
		{0, 700, 30, [2]int64{200, 500}},    // around the middle, 3 bins
		{0, 1000, 100, [2]int64{0, 700}},    // bin 7 is too full to take in: grow the other way
		{650, 800, 100, [2]int64{700, 800}}, // the middle bin alone is over: cut to it and the window
		{0, 1000, 60, [2]int64{100, 700}},   // 60 events: bins 1 to 6
	} {
		from, to := d.shrink(tc.from, tc.to, tc.limit)
		if [2]int64{from, to} != tc.want {
			t.Errorf("shrink(%d, %d, %d) = [%d, %d), want %v", tc.from, tc.to, tc.limit, from, to, tc.want)
		}
		if from < tc.from || to > tc.to || from >= to {
			t.Errorf("shrink(%d, %d, %d) = [%d, %d): not inside and not empty", tc.from, tc.to, tc.limit, from, to)
		}
	}
}

// A timeline.json window holding more events than a build may hold is
// cut around its middle before it is built: the answer says which span
// it holds in full, and that span holds every event there is.
func TestServeTimelineWindowIsBounded(t *testing.T) {
	runs, _ := fixture(t)
	s := newTestServer(t, Config{RunsDir: runs})
	s.windowEvents = 200
	run, err := trace.ReadRun(runs + "/beta")
	must(t, err)
	first := run.Ranks[0].Events[0].Start
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			first = min(first, e.Start)
		}
	}
	const from, to = 0, 1 << 40
	res := get(t, s, fmt.Sprintf("/runs/beta/timeline.json?from=%d&to=%d", from, to))
	var td report.Timeline
	must(t, json.Unmarshal([]byte(body(t, res)), &td))
	if len(td.Windows) != 1 {
		t.Fatalf("windows %v", td.Windows)
	}
	w := td.Windows[0]
	inside, total := 0, 0
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			if e.Kind == trace.KindMark {
				continue
			}
			total++
			if e.Start-first < w[1] && e.End()-first >= w[0] {
				inside++
			}
		}
	}
	if n := len(td.Events.Rank); n != inside || n == 0 || n >= total || n > 300 {
		t.Fatalf("window %v holds %d events of %d; the answer has %d, want them all and at most about 200", w, inside, total, n)
	}
	t.Logf("window %v: %d of %d events", w, inside, total)
}
