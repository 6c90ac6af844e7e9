package report

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestUntimedSourcePage: the page of an NCCL log without timestamps says
// its times are unknown and leaves out what would be drawn from them; with
// timestamps, the arrival skew stays; a timed run keeps every section.
func TestUntimedSourcePage(t *testing.T) {
	sections := func(doc string) []string {
		var ids []string
		for _, m := range regexp.MustCompile(`<section class="cp-section" id="([a-z-]+)"`).FindAllStringSubmatch(doc, -1) {
			ids = append(ids, m[1])
		}
		return ids
	}
	card := func(doc, label string) string {
		m := regexp.MustCompile(`(?s)<div class="cp-card-label">(?:<a [^>]*>)?` + label + `(?:</a>)?</div><div class="cp-card-value">([^<]*)</div>`).FindStringSubmatch(doc)
		if m == nil {
			return ""
		}
		return m[1]
	}
	for _, tc := range []struct {
		name, path   string
		want, absent []string
		note         string
		unknownCards []string
	}{
		{"no times", "../importers/testdata/nccl_debug.log", []string{"traffic", "tables"},
			[]string{"timeline-section", "time", "skew", "waiting", "network", "critical-path"}, "records no times", []string{"run span", "communication"}},
		{"no durations", "../importers/testdata/nccl_debug_timestamps.log", []string{"timeline-section", "traffic", "tables"},
			[]string{"time", "network", "critical-path"}, "records when each call was made but not how long it took", []string{"communication"}},
		{"timed", horovodFixture, []string{"timeline-section", "time", "skew", "waiting", "network"}, nil, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page, s := importedReport(t, tc.path)
			b, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			doc := string(b)
			got := sections(doc)
			for _, id := range tc.want {
				if !slices.Contains(got, id) {
					t.Errorf("no section %s (sections %v)", id, got)
				}
			}
			for _, id := range tc.absent {
				if slices.Contains(got, id) {
					t.Errorf("section %s is drawn from times the source does not have (sections %v)", id, got)
				}
			}
			if tc.note != "" && !strings.Contains(doc, tc.note) {
				t.Errorf("no note saying the source %s", tc.note)
			}
			if tc.note == "" && (s.IsUnknown("durations") || strings.Contains(doc, "records no times")) {
				t.Errorf("a timed run's figures are unknown: %v", s.Unknown)
			}
			// With the calls' starts, the arrival skew is measured.
			if s.IsUnknown("skew") != s.IsUnknown("span") || !s.IsUnknown("span") && s.Skew.Dist.N == 0 {
				t.Errorf("skew unknown %v over %d calls, span unknown %v", s.IsUnknown("skew"), s.Skew.Dist.N, s.IsUnknown("span"))
			}
			for _, c := range tc.unknownCards {
				if v := card(doc, c); v != "unknown" {
					t.Errorf("card %s reads %q, want unknown", c, v)
				}
			}
			if strings.Contains(doc, "chart-opsize") != (tc.note == "") {
				t.Errorf("the collective-time-by-size chart is drawn: %v, want %v", strings.Contains(doc, "chart-opsize"), tc.note == "")
			}
		})
	}
}

// TestIndexUnknownCommunication: the list of runs shows a run whose
// source cannot give its communication share as unknown, as its report
// does, not as 0%; a run with a known share keeps it.
func TestIndexUnknownCommunication(t *testing.T) {
	unknown := newRunRow(RunEntry{Name: "imported", Events: 100, CommUnknown: true}, false)
	known := newRunRow(RunEntry{Name: "recorded", Events: 100, CommFraction: 0.25}, false)
	if unknown.CommText != "unknown" || unknown.VComm != "" {
		t.Errorf("unknown share: %q (sort key %v)", unknown.CommText, unknown.VComm)
	}
	if known.CommText != "25%" || known.VComm == "" {
		t.Errorf("known share: %q (sort key %v)", known.CommText, known.VComm)
	}
}
