package report

import (
	"fmt"
	"io"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/units"
)

// FormatValue prints a figure in its unit for people.
func FormatValue(v float64, unit string) string {
	switch unit {
	case "ns":
		return units.Duration(v)
	case "bytes":
		return units.Bytes(int64(v))
	case "GB/s":
		return units.GBps(v)
	case "fraction":
		return fmt.Sprintf("%.1f%%", 100*v)
	case "samples/s":
		return fmt.Sprintf("%.0f/s", v)
	case "count":
		return fmt.Sprintf("%.4g", v)
	case "ns/byte":
		return fmt.Sprintf("%.4g ns/B", v)
	}
	return fmt.Sprintf("%.4g", v)
}

// FormatRel prints a relative change: +12.3%, or "new"/"gone".
func FormatRel(c analyze.Change) string {
	switch {
	case c.Rel == nil:
		return "new"
	case c.B == 0:
		return "gone"
	}
	return fmt.Sprintf("%+.1f%%", 100**c.Rel)
}

// DiffTable is the diff's changes as a table, at most limit rows (0: all).
func DiffTable(d *analyze.Diff, limit int) *Table {
	t := &Table{Title: fmt.Sprintf("Changes from A to B (per %s), largest first", d.Basis), Columns: []Column{
		{Name: "section"}, {Name: "metric"}, {Name: "A", Numeric: true}, {Name: "B", Numeric: true},
		{Name: "change", Numeric: true}, {Name: ""}}}
	for i, c := range d.Changes {
		if limit > 0 && i >= limit {
			break
		}
		t.Rows = append(t.Rows, []string{c.Section, c.Metric, FormatValue(c.A, c.Unit), FormatValue(c.B, c.Unit), FormatRel(c), c.Verdict})
	}
	return t
}

// WriteDiffOverview prints what the two runs are and how their
// configurations differ.
func WriteDiffOverview(w io.Writer, d *analyze.Diff) {
	name := func(r analyze.RunInfo) string {
		if r.Name != "" {
			return r.Name + " (" + r.Dir + ")"
		}
		return r.Dir
	}
	fmt.Fprintf(w, "A: %s, %d ranks, %d events\n", name(d.A), d.A.WorldSize, d.A.Events)
	fmt.Fprintf(w, "B: %s, %d ranks, %d events\n", name(d.B), d.B.WorldSize, d.B.Events)
	if len(d.Config) == 0 {
		fmt.Fprintln(w, "configuration: the same")
	}
	for _, c := range d.Config {
		fmt.Fprintf(w, "configuration: %s %q -> %q\n", c.Key, c.A, c.B)
	}
	if d.PerSample {
		fmt.Fprintf(w, "per-sample figures use the global batch: %d (A) and %d (B) samples per step\n", d.A.SamplesPerStep, d.B.SamplesPerStep)
	}
}
