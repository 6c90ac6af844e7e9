package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/export"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/trace"
)

type dumpOptions struct {
	rank   int
	kind   string
	limit  int
	format string
}

func newDumpCmd(ios *iostreams.IOStreams) *cobra.Command {
	o := &dumpOptions{}
	cmd := &cobra.Command{
		Use:   "dump RUN",
		Short: "Print a run's events as a table, JSON or CSV",
		Long: `dump prints the events of a recorded run, every rank merged in time order on
the aligned clock, for debugging and scripts. Problems with the run (a cut
stream, a missing rank) are reported on standard error.`,
		Example: `  commprof dump runs/bench-allreduce-20261122-010000 --kind recv --limit 20
  commprof dump RUN --rank 0 --format csv > rank0.csv`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDump(ios, o, args[0], cmd.Flags().Changed("rank"))
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.rank, "rank", 0, "only this rank's events")
	f.StringVar(&o.kind, "kind", "", "only events of this kind: collective, send, recv, compute, step, mark, wait, reduce or sample")
	f.IntVar(&o.limit, "limit", 0, "print at most this many events (0: all)")
	f.StringVar(&o.format, "format", "table", "table, json or csv")
	return cmd
}

func runDump(ios *iostreams.IOStreams, o *dumpOptions, dir string, rankSet bool) error {
	stdout, stderr := ios.Out, ios.ErrOut
	switch o.format {
	case "table", "json", "csv":
	default:
		return usagef("--format %q: want table, json or csv", o.format)
	}
	var kind trace.Kind
	if o.kind != "" {
		k, err := trace.ParseKind(o.kind)
		if err != nil {
			return usageError{fmt.Errorf("--kind: %w", err)}
		}
		kind = k
	}
	if o.limit < 0 {
		return usagef("--limit %d: want 0 or more", o.limit)
	}
	run, err := trace.ReadRun(dir)
	if err != nil {
		return err
	}
	for _, p := range run.Problems {
		fmt.Fprintf(stderr, "commprof: warning: %v\n", p)
	}
	var evs []trace.Event
	found := false
	for _, r := range run.Ranks {
		if rankSet && r.Info.Rank != o.rank {
			continue
		}
		found = true
		for _, e := range r.Events {
			if kind == 0 || e.Kind == kind {
				evs = append(evs, e)
			}
		}
	}
	if rankSet && !found {
		return fmt.Errorf("run %s has no rank %d (it has %d ranks)", dir, o.rank, len(run.Ranks))
	}
	sort.SliceStable(evs, func(i, j int) bool {
		if evs[i].Start != evs[j].Start {
			return evs[i].Start < evs[j].Start
		}
		return evs[i].Rank < evs[j].Rank
	})
	if o.limit > 0 && len(evs) > o.limit {
		evs = evs[:o.limit]
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	switch o.format {
	case "json":
		return writeJSON(w, evs)
	case "csv":
		return export.CSVEvents(w, evs)
	}
	return writeTable(w, evs)
}

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

// writeJSON writes the events as a JSON array of objects keyed by the
// trace's column names, in the format's order.
func writeJSON(w io.Writer, evs []trace.Event) error {
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

func writeTable(w io.Writer, evs []trace.Event) error {
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
