package report

import (
	"encoding/csv"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/units"
)

// Table is one of the stats views as rows of cells: what `stats` prints
// as text or CSV and what the HTML report shows.
type Table struct {
	Title   string
	Columns []Column
	Rows    [][]string

	// For pages: a line under the title; each cell's sort key (the raw
	// number behind it), row for row; the definition each column's
	// header links to (by column name); the column the rows are sorted
	// by; and Full to show every row rather than collapse a long table.
	Note       string
	Keys       [][]string
	Defs       map[string]string
	Sorted     bool
	SortedBy   int
	SortedDesc bool
	Full       bool
	// Links turn cells into links on a page: by row and column, the
	// cell's links, drawn in place of its text.
	Links map[[2]int][]Link
	// RowDefs, for a table whose rows are figures (a diff's), link each
	// row's "metric" cell to its figure's definition, row for row.
	RowDefs []string
}

// Column is a table column; numeric columns are right-aligned.
type Column struct {
	Name    string
	Numeric bool
	Unit    string // for CSV headers: ns, bytes, GB/s, ...
}

// Header is the column's header in text and on pages: its name, and its
// unit where the cells print bare numbers (GB/s); durations and sizes
// carry theirs in every cell.
func (c Column) Header() string {
	if c.Unit == "GB/s" && !strings.Contains(c.Name, c.Unit) {
		return c.Name + " (" + c.Unit + ")"
	}
	return c.Name
}

// Views are the --by choices of `commprof stats`.
var Views = []string{"op", "rank", "size", "step", "peer", "memory"}

// View returns the table of one view of a summary; raw cells carry plain
// numbers (for CSV) instead of human units.
func View(s *analyze.Summary, by string, raw bool) (*Table, error) {
	f := formatter{raw: raw}
	switch by {
	case "op":
		return opTable(s, f), nil
	case "rank":
		return rankTable(s, f), nil
	case "size":
		return sizeTable(s, f), nil
	case "step":
		return stepTable(s, f), nil
	case "peer":
		return peerTable(s, f), nil
	case "memory":
		return memoryTable(s, f), nil
	}
	return nil, fmt.Errorf("unknown view %q (want %s)", by, strings.Join(Views, ", "))
}

type formatter struct{ raw bool }

func (f formatter) dur(ns float64) string {
	if f.raw {
		return fmt.Sprintf("%.0f", ns)
	}
	return units.Duration(ns)
}

func (f formatter) bytes(b float64) string {
	if f.raw {
		return fmt.Sprintf("%.0f", b)
	}
	return units.Bytes(int64(b))
}

func (f formatter) gbps(x float64) string { return fmt.Sprintf("%.3f", x) }

func (f formatter) frac(x float64) string {
	if f.raw {
		return fmt.Sprintf("%.4f", x)
	}
	return units.Percent(x, 1)
}

func (f formatter) int(n int64) string { return fmt.Sprintf("%d", n) }

// or is cell, or "—" (empty in CSV) when the run's source cannot give
// figure (Summary.Unknown).
func (f formatter) or(s *analyze.Summary, figure, cell string) string {
	switch {
	case !s.IsUnknown(figure):
		return cell
	case f.raw:
		return ""
	}
	return "—"
}

func opTable(s *analyze.Summary, f formatter) *Table {
	t := &Table{Title: "Collectives by op, algorithm and size", Columns: []Column{
		{Name: "op"}, {Name: "algo"}, {Name: "size"}, {Name: "ranks", Numeric: true}, {Name: "calls", Numeric: true},
		{Name: "bytes", Numeric: true, Unit: "bytes"}, {Name: "total", Numeric: true, Unit: "ns"}, {Name: "mean", Numeric: true, Unit: "ns"},
		{Name: "p50", Numeric: true, Unit: "ns"}, {Name: "p95", Numeric: true, Unit: "ns"}, {Name: "p99", Numeric: true, Unit: "ns"},
		{Name: "max", Numeric: true, Unit: "ns"}, {Name: "algbw", Numeric: true, Unit: "GB/s"}, {Name: "busbw", Numeric: true, Unit: "GB/s"},
		{Name: "wait", Numeric: true, Unit: "fraction"}}}
	for _, c := range s.Collectives {
		d := func(ns float64) string { return f.or(s, "durations", f.dur(ns)) }
		t.Rows = append(t.Rows, []string{c.Op, c.Algo, c.BucketLbl, f.int(int64(c.Ranks)), f.int(c.Calls), f.bytes(float64(c.Bytes)),
			d(float64(c.Time.Sum)), d(c.Time.Mean), d(float64(c.Time.P50)), d(float64(c.Time.P95)), d(float64(c.Time.P99)),
			d(float64(c.Time.Max)), f.or(s, "bandwidth", f.gbps(c.AlgBWGBps)), f.or(s, "bandwidth", f.gbps(c.BusBWGBps)), f.or(s, "wait", f.frac(c.WaitFraction))})
	}
	return t
}

func rankTable(s *analyze.Summary, f formatter) *Table {
	t := &Table{Title: "Ranks", Columns: []Column{
		{Name: "rank", Numeric: true}, {Name: "host"}, {Name: "events", Numeric: true}, {Name: "compute", Numeric: true, Unit: "ns"},
		{Name: "comm", Numeric: true, Unit: "ns"}, {Name: "exposed", Numeric: true, Unit: "ns"}, {Name: "overlapped", Numeric: true, Unit: "ns"},
		{Name: "wait", Numeric: true, Unit: "ns"}, {Name: "last", Numeric: true}, {Name: "late", Numeric: true, Unit: "ns"},
		{Name: "sent", Numeric: true, Unit: "bytes"}, {Name: "recv", Numeric: true, Unit: "bytes"},
		{Name: "msgs sent", Numeric: true}, {Name: "msgs recv", Numeric: true}}}
	work := func(figure string, ns int64) string { return f.or(s, figure, f.dur(float64(ns))) }
	for _, r := range s.Ranks {
		host := r.Host
		if r.Truncated {
			host += " (cut)"
		}
		t.Rows = append(t.Rows, []string{f.int(int64(r.Rank)), host, f.int(r.Events), work("compute", r.ComputeNS), work("comm", r.CommNS),
			work("exposed", r.ExposedNS), work("overlapped", r.OverlappedNS), work("wait", r.WaitNS), f.or(s, "skew", f.int(r.LastArrivals)),
			f.or(s, "skew", f.dur(r.MeanLateNS)),
			f.bytes(float64(r.BytesSent)), f.bytes(float64(r.BytesRecv)), f.int(r.MsgsSent), f.int(r.MsgsRecv)})
	}
	return t
}

func sizeTable(s *analyze.Summary, f formatter) *Table {
	t := &Table{Title: "Messages by op and size", Columns: []Column{
		{Name: "op"}, {Name: "size"}, {Name: "messages", Numeric: true}, {Name: "bytes", Numeric: true, Unit: "bytes"},
		{Name: "time", Numeric: true, Unit: "ns"}, {Name: "wait", Numeric: true, Unit: "ns"}, {Name: "transfer bw", Numeric: true, Unit: "GB/s"}}}
	for _, m := range s.MessageSizes {
		t.Rows = append(t.Rows, []string{m.Op, m.BucketLbl, f.int(m.Messages), f.bytes(float64(m.Bytes)), f.or(s, "durations", f.dur(float64(m.TimeNS))),
			// Without a receive's wait for its first byte (recv_wait), its
			// transfer is not told from its waiting either.
			f.or(s, "recv_wait", f.or(s, "durations", f.dur(float64(m.WaitNS)))), f.or(s, "recv_wait", f.or(s, "bandwidth", f.gbps(m.GBps)))})
	}
	return t
}

func stepTable(s *analyze.Summary, f formatter) *Table {
	t := &Table{Title: "Steps (mean over ranks)", Columns: []Column{
		{Name: "step", Numeric: true}, {Name: "ranks", Numeric: true}, {Name: "time", Numeric: true, Unit: "ns"},
		{Name: "slowest rank", Numeric: true, Unit: "ns"}, {Name: "compute", Numeric: true, Unit: "ns"}, {Name: "exposed comm", Numeric: true, Unit: "ns"},
		{Name: "overlapped comm", Numeric: true, Unit: "ns"}, {Name: "idle", Numeric: true, Unit: "ns"}, {Name: "wait", Numeric: true, Unit: "ns"},
		{Name: "comm bytes", Numeric: true, Unit: "bytes"}}}
	for _, st := range s.Steps {
		t.Rows = append(t.Rows, []string{f.int(int64(st.Step)), f.int(int64(st.Ranks)), f.dur(st.TimeNS), f.dur(float64(st.MaxNS)), f.dur(st.ComputeNS),
			f.dur(st.ExposedNS), f.dur(st.OverlappedNS), f.dur(st.IdleNS), f.dur(st.WaitNS), f.bytes(st.CommBytes)})
	}
	return t
}

func peerTable(s *analyze.Summary, f formatter) *Table {
	t := &Table{Title: "Traffic by sender and receiver", Columns: []Column{
		{Name: "src", Numeric: true}, {Name: "dst", Numeric: true}, {Name: "bytes", Numeric: true, Unit: "bytes"},
		{Name: "messages", Numeric: true}, {Name: "recv time", Numeric: true, Unit: "ns"}, {Name: "GB/s", Numeric: true, Unit: "GB/s"}}}
	for _, c := range s.Matrix.Cells {
		if c.Messages == 0 {
			continue
		}
		bw := 0.0
		if c.TimeNS > 0 {
			bw = float64(c.Bytes) / float64(c.TimeNS)
		}
		t.Rows = append(t.Rows, []string{f.int(int64(c.Src)), f.int(int64(c.Dst)), f.bytes(float64(c.Bytes)), f.int(c.Messages),
			f.or(s, "durations", f.dur(float64(c.TimeNS))), f.or(s, "bandwidth", f.gbps(bw))})
	}
	return t
}

// WriteText prints the table aligned, numbers to the right.
func (t *Table) WriteText(w io.Writer) error {
	width := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		width[i] = utf8.RuneCountInString(c.Header())
	}
	for _, r := range t.Rows {
		for i, cell := range r {
			width[i] = max(width[i], utf8.RuneCountInString(cell))
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		for i, cell := range cells {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(cell))
			if t.Columns[i].Numeric {
				b.WriteString(pad + cell)
			} else if i < len(cells)-1 {
				b.WriteString(cell + pad)
			} else {
				b.WriteString(cell)
			}
		}
		b.WriteString("\n")
	}
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Header()
	}
	line(names)
	if len(t.Rows) == 0 {
		b.WriteString("(none)\n")
	}
	for _, r := range t.Rows {
		line(r)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteCSV writes the table with a header naming each column's unit.
func (t *Table) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	h := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		h[i] = csvName(c)
	}
	if err := cw.Write(h); err != nil {
		return err
	}
	if err := cw.WriteAll(t.Rows); err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

// csvName is a column's CSV header: snake_case with its unit as a suffix
// (time_ns, sent_bytes, busbw_gbps) unless the name already is the unit.
func csvName(c Column) string {
	name := strings.ToLower(strings.ReplaceAll(c.Name, " ", "_"))
	suffix := map[string]string{"ns": "ns", "bytes": "bytes", "GB/s": "gbps", "fraction": "fraction"}[c.Unit]
	switch {
	case name == "gb/s":
		return "gbps"
	case suffix == "" || name == suffix:
		return name
	}
	return name + "_" + suffix
}
