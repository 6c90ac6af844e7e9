package export

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"

	"github.com/commprof/commprof/trace"
)

// EventsJSON and EventsTable are `commprof dump`'s formats (its CSV is
// CSVEvents): every column of the trace format, in its order.

// column is one of the trace's columns as dump prints it.
type column struct {
	name  string // the trace's column name (trace.Col*)
	value func(e *trace.Event) any
}

// columns are every column of the trace format, in its order.
var columns = []column{
	{trace.ColRank, func(e *trace.Event) any { return e.Rank }},
	{trace.ColKind, func(e *trace.Event) any { return e.Kind.String() }},
	{trace.ColName, func(e *trace.Event) any { return e.Name }},
	{trace.ColStart, func(e *trace.Event) any { return e.Start }},
	{trace.ColDur, func(e *trace.Event) any { return e.Dur }},
	{trace.ColBytes, func(e *trace.Event) any { return e.Bytes }},
	{trace.ColPeer, func(e *trace.Event) any { return e.Peer }},
	{trace.ColSeq, func(e *trace.Event) any { return e.Seq }},
	{trace.ColStep, func(e *trace.Event) any { return e.Step }},
	{trace.ColAlgo, func(e *trace.Event) any { return e.Algo }},
	{trace.ColDType, func(e *trace.Event) any { return e.DType }},
	{trace.ColRoot, func(e *trace.Event) any { return e.Root }},
	{trace.ColChunk, func(e *trace.Event) any { return e.Chunk }},
	{trace.ColComm, func(e *trace.Event) any { return e.Comm }},
	{trace.ColWait, func(e *trace.Event) any { return e.Wait }},
	{trace.ColValue, func(e *trace.Event) any { return trace.Number(e.Value) }},
	{trace.ColLabel, func(e *trace.Event) any { return e.Label }},
}

// EventsJSON writes the events as a JSON array of objects keyed by the
// trace's column names, in the format's order.
func EventsJSON(w io.Writer, evs []trace.Event) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("[")
	for i := range evs {
		if i > 0 {
			bw.WriteString(",")
		}
		bw.WriteString("\n {")
		for j, c := range columns {
			v, err := json.Marshal(c.value(&evs[i]))
			if err != nil {
				return err
			}
			if j > 0 {
				bw.WriteString(", ")
			}
			fmt.Fprintf(bw, "%q: %s", c.name, v)
		}
		bw.WriteString("}")
	}
	bw.WriteString("\n]\n")
	return bw.Flush()
}

// printable quotes a string from a trace if it holds anything a terminal
// would interpret.
func printable(s string) string {
	if s == "" {
		return "-"
	}
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || r == ' ' }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// tableFormat is each column's width and verb in the table, in the
// order of columns.
var tableFormat = []string{"%4v", "%-10v", "%-14v", "%14v", "%11v", "%11v", "%4v", "%6v", "%5v", "%-18v", "%-7v", "%4v", "%5v", "%-8v", "%10v", "%v", "%v"}

// EventsTable writes the events as a table for a terminal, a column per
// trace column; strings that hold spaces or what a terminal would
// interpret are quoted, empty ones are "-".
func EventsTable(w io.Writer, evs []trace.Event) error {
	bw := bufio.NewWriter(w)
	for j, c := range columns {
		if j > 0 {
			bw.WriteString(" ")
		}
		fmt.Fprintf(bw, tableFormat[j], c.name)
	}
	bw.WriteString("\n")
	for i := range evs {
		for j, c := range columns {
			if j > 0 {
				bw.WriteString(" ")
			}
			v := c.value(&evs[i])
			if s, ok := v.(string); ok {
				v = printable(s)
			} else if n, ok := v.(trace.Number); ok {
				v = float64(n)
			}
			fmt.Fprintf(bw, tableFormat[j], v)
		}
		if _, err := bw.WriteString("\n"); err != nil {
			return err
		}
	}
	return bw.Flush()
}
