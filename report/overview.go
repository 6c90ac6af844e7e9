package report

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/trace"
)

// WriteOverview prints a run's identity, headline numbers and findings.
func WriteOverview(w io.Writer, s *analyze.Summary) {
	r := s.Run
	name := r.Name
	if name == "" {
		name = r.Dir
	}
	span := units.Duration(float64(r.SpanNS)) + " recorded"
	if s.IsUnknown("span") {
		span = "no times in the source"
	}
	fmt.Fprintf(w, "run %s: %d ranks on %d host(s), %d events, %s, %s on disk",
		name, r.WorldSize, max(len(r.Hosts), 1), r.Events, span, units.Bytes(r.DiskBytes))
	if r.Status != "" {
		fmt.Fprintf(w, ", %s", r.Status)
	}
	if c := clockNote(r); c != "" && r.ClockMethod != "same-host" {
		fmt.Fprintf(w, ", %s", c)
	}
	fmt.Fprintln(w)
	if r.Error != "" {
		fmt.Fprintf(w, "the run %s: %s\n", r.Status, r.Error)
	}
	if len(r.Config) > 0 {
		keys := make([]string, 0, len(r.Config))
		for k := range r.Config {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var kv []string
		for _, k := range keys {
			kv = append(kv, k+"="+r.Config[k])
		}
		fmt.Fprintf(w, "config: %s\n", strings.Join(kv, " "))
	}
	if acc, ok := r.Metrics[trace.MetricTestAccuracy]; ok {
		fmt.Fprintf(w, "test accuracy: %s\n", units.Percent(acc, 2))
	}
	for _, f := range s.Findings {
		fmt.Fprintf(w, "  - %s\n", f)
	}
}
