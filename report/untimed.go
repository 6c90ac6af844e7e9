package report

import (
	"fmt"
	"slices"
	"strings"

	"github.com/commprof/commprof/analyze"
)

// A run whose source has no times (an NCCL debug log without timestamps)
// or no durations (one with timestamps) has its time-derived figures in
// Summary.Unknown (analyze's forgetTimes). Its page says so once and
// leaves out what would be drawn from zeros.

// timeNotes say what the page leaves out or restricts, and why.
func timeNotes(s *analyze.Summary) []string {
	var out []string
	if n := untimedNote(s); n != "" {
		out = append(out, n)
	}
	if src := s.Run.Source; src != nil && src.PartialRanks {
		out = append(out, fmt.Sprintf("Ranks other than 0 hold only the %d collectives several ranks recorded (a Horovod timeline names the other ranks only in the negotiations it wrote ticks for): each rank's communication and waiting cover those calls, so that the ranks compare, and how much of the run the ranks spent communicating is unknown.", s.Skew.Calls))
	}
	return out
}

// untimedNote says what the page leaves out and why; "" when every
// figure is known.
func untimedNote(s *analyze.Summary) string {
	if !s.IsUnknown("durations") {
		return ""
	}
	var hidden []string
	for _, sec := range untimedSections {
		if s.IsUnknown(sec.figure) {
			hidden = append(hidden, sec.title)
		}
	}
	if s.IsUnknown("span") {
		return "This run's source records no times, only the order of the calls (NCCL writes none on its per-call lines unless NCCL_DEBUG_TIMESTAMP_FORMAT is set): the run's span, communication time, waits, arrival skew, stragglers and bandwidths are unknown, so the page leaves out the timeline, " +
			strings.Join(hidden, ", ") + ", and its tables show — for them. Counts, sizes, communicators and algorithms are as recorded."
	}
	return "This run's source records when each call was made but not how long it took: communication time, waits, stragglers and bandwidths are unknown, so the page leaves out " +
		strings.Join(hidden, ", ") + ", and its tables show — for them. The arrival skew is from the calls' start times."
}

// untimedSections are the page's sections drawn from a figure a source
// without times cannot give.
var untimedSections = []struct{ id, title, figure string }{
	{"time", "where the time goes", "comm"},
	{"network", "the bandwidth and the model", "bandwidth"},
	{"critical-path", "the critical path", "straggler"},
}

// untimedCharts are charts of other sections drawn from durations.
var untimedCharts = map[string]string{"chart-opsize": "durations"}

// withoutUnknownTimes removes the sections and charts whose figures the
// run's source cannot give.
func withoutUnknownTimes(s *analyze.Summary, secs []section) []section {
	secs = slices.DeleteFunc(secs, func(sec section) bool {
		for _, u := range untimedSections {
			if sec.ID == u.id && s.IsUnknown(u.figure) {
				return true
			}
		}
		return false
	})
	for i := range secs {
		secs[i].Charts = slices.DeleteFunc(secs[i].Charts, func(c chartSpec) bool {
			f, ok := untimedCharts[c.ID]
			return ok && s.IsUnknown(f)
		})
	}
	return secs
}

// unknownTimeCards shows the run span and communication cards as
// unknown when the source cannot give them.
func unknownTimeCards(s *analyze.Summary, cs []card) []card {
	for i := range cs {
		switch {
		case cs[i].Label == "run span" && s.IsUnknown("span"):
			cs[i].Value, cs[i].Detail = "unknown", "the source records the calls' order, not their times"
		case cs[i].Label == "communication" && s.IsUnknown("comm"):
			cs[i].Value, cs[i].Class, cs[i].Detail = "unknown", "", "the source does not record how long calls took"
		case cs[i].Label == "communication" && s.IsUnknown("communication"):
			cs[i].Value, cs[i].Class, cs[i].Detail = "unknown", "", "ranks other than 0 hold only the calls several ranks recorded"
		}
	}
	return cs
}
