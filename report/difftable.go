package report

import (
	"fmt"
	"io"
	"math"
	"strings"

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
		return units.Percent(v, 1)
	case "samples/s":
		return fmt.Sprintf("%.0f/s", v)
	case "count":
		return fmt.Sprintf("%.4g", v)
	case "ns/byte":
		return fmt.Sprintf("%.4g ns/B", v)
	case "cores", "J", "W":
		return fmt.Sprintf("%.3g %s", v, unit)
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

// FormatNoise prints what a change is measured against: the interval on
// its relative change at 95% ("−12%…+30%"), or the floor for a figure
// without samples inside a run ("±10% floor", or "±4% replay" for the
// straggler replay's noise); "" for none.
func FormatNoise(c analyze.Change) string {
	switch {
	case c.NoiseFrom == analyze.RunToRun:
		return fmt.Sprintf("×%.3g run to run", 1+c.NoiseRel)
	case c.CILow != nil && c.CIHigh != nil:
		return fmt.Sprintf("%s…%s", pct(*c.CILow), pct(*c.CIHigh))
	case c.NoiseRel > 0:
		return "±" + strings.TrimPrefix(pct(c.NoiseRel), "+") + " " + c.NoiseFrom
	}
	return ""
}

// pct is a relative change in whole percent, or tenths below 10%.
func pct(r float64) string {
	if math.Abs(r) < 0.1 {
		return fmt.Sprintf("%+.1f%%", 100*r)
	}
	return fmt.Sprintf("%+.0f%%", 100*r)
}

// IsEffect reports whether a change has a verdict: better or worse,
// larger than the runs' own variation allows.
func IsEffect(c analyze.Change) bool {
	return c.Verdict == analyze.Better || c.Verdict == analyze.Worse
}

// OutcomeTable is the diff's outcomes as a table: what the configuration
// was changed for.
func OutcomeTable(d *analyze.Diff) *Table {
	t := &Table{Title: "Outcomes", Columns: []Column{
		{Name: "metric"}, {Name: "A", Numeric: true}, {Name: "B", Numeric: true}, {Name: "change", Numeric: true},
		{Name: "95% interval", Numeric: true}, {Name: ""}}}
	for _, c := range d.Outcomes {
		t.Rows = append(t.Rows, []string{c.Metric, FormatValue(c.A, c.Unit), FormatValue(c.B, c.Unit), FormatRel(c), FormatNoise(c), VerdictText(c)})
		t.RowDefs = append(t.RowDefs, changeDef(c))
	}
	t.Defs = map[string]string{"change": "diff-change", "95% interval": "diff-noise"}
	return t
}

// DiffTables are the diff's changes as tables: the per-step (or per-run)
// ones, at most limit rows (0: all), those that move the time per sample
// (or per step) most first with how much they move it; then, when there
// are any, the per-epoch ones (ops and collective sizes called less than
// once every other step), all of them. With effectsOnly, only the changes
// with a verdict (better or worse) are listed, and each table's note says
// how many others were left out.
func DiffTables(d *analyze.Diff, limit int, effectsOnly bool) []*Table {
	per := "sample"
	if !d.PerSample {
		per = d.Basis
	}
	steps := &Table{Title: fmt.Sprintf("Changes from A to B (per %s), those that move the time per %s most first", d.Basis, per), Columns: []Column{
		{Name: "section"}, {Name: "metric"}, {Name: "A", Numeric: true}, {Name: "B", Numeric: true},
		{Name: "change", Numeric: true}, {Name: "95% interval", Numeric: true}, {Name: "effect per " + per, Numeric: true}, {Name: ""}}}
	epochs := &Table{Title: "Per epoch: ops and sizes called less than once every other step (the first broadcast, an epoch's evaluation)",
		Columns: []Column{{Name: "metric"}, {Name: "A", Numeric: true}, {Name: "B", Numeric: true}, {Name: "change", Numeric: true},
			{Name: "95% interval", Numeric: true}, {Name: ""}}}
	more, quiet, quietEpochs := 0, 0, 0
	for _, c := range d.Changes {
		switch {
		case effectsOnly && !IsEffect(c) && c.Section == "epoch":
			quietEpochs++
		case effectsOnly && !IsEffect(c):
			quiet++
		case c.Section == "epoch":
			epochs.Rows = append(epochs.Rows, []string{c.Metric, FormatValue(c.A, c.Unit), FormatValue(c.B, c.Unit), FormatRel(c), FormatNoise(c), VerdictText(c)})
			epochs.RowDefs = append(epochs.RowDefs, changeDef(c))
		case limit > 0 && len(steps.Rows) >= limit:
			more++
		default:
			effect := ""
			if c.EffectNS != 0 {
				effect = signed(c.EffectNS)
			}
			steps.Rows = append(steps.Rows, []string{c.Section, c.Metric, FormatValue(c.A, c.Unit), FormatValue(c.B, c.Unit), FormatRel(c), FormatNoise(c), effect, VerdictText(c)})
			steps.RowDefs = append(steps.RowDefs, changeDef(c))
		}
	}
	steps.Defs = map[string]string{"change": "diff-change", steps.Columns[6].Name: "effect", "95% interval": "diff-noise"}
	epochs.Defs = map[string]string{"change": "diff-change", "95% interval": "diff-noise"}
	var notes []string
	if more > 0 {
		what := "more"
		if effectsOnly {
			what = "more with a verdict"
		}
		notes = append(notes, fmt.Sprintf("%d %s: --limit 0 prints them", more, what))
	}
	if quiet > 0 {
		notes = append(notes, fmt.Sprintf("%d within noise or without a direction: --all prints them", quiet))
	}
	if len(notes) > 0 {
		steps.Note = "(" + strings.Join(notes, "; ") + ")"
	}
	if quietEpochs > 0 {
		epochs.Note = fmt.Sprintf("(%d within noise or without a direction: --all prints them)", quietEpochs)
	}
	if len(epochs.Rows) == 0 && epochs.Note == "" {
		return []*Table{steps}
	}
	return []*Table{steps, epochs}
}

// signed is a duration with its sign.
func signed(ns float64) string {
	if ns < 0 {
		return "-" + units.Duration(-ns)
	}
	return "+" + units.Duration(ns)
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
	fmt.Fprintf(w, "%s\n", d.Title)
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
	if d.Tests > 1 {
		fmt.Fprintf(w, "intervals: 95%% for the %d figures with samples at once, each at %s\n", d.Tests, units.Percent(d.Level, 1))
	}
	if l := FormatLoad(d); l != "" {
		fmt.Fprintf(w, "machine load: %s\n", l)
	}
}

// FormatLoad says how long each run's ranks waited for a core and what
// that does to the diff's verdicts; "" when a run did not read it.
func FormatLoad(d *analyze.Diff) string {
	l := d.Load
	if l == nil {
		return ""
	}
	of := "of each step"
	if d.Basis != "step" {
		of = "of their time"
	}
	s := fmt.Sprintf("the ranks waited for a core %s %s in A and %s in B", units.Percent(l.AShare, 1), of, units.Percent(l.BShare, 1))
	switch {
	case l.Configured != "":
		return s + " (the configurations differ in " + l.Configured + ": the load is their change, not noise)"
	case l.Explained == 1:
		return s + "; 1 change no larger than that may account for is within noise (load)"
	case l.Explained > 1:
		return s + fmt.Sprintf("; %d changes no larger than that may account for are within noise (load)", l.Explained)
	}
	return s
}

// VerdictText is a change's verdict as the tables print it: "within
// noise (load)" where the machine's load may account for the change.
func VerdictText(c analyze.Change) string {
	if c.LoadExplains && c.Verdict == analyze.WithinNoise {
		return c.Verdict + " (load)"
	}
	return c.Verdict
}
