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
	"github.com/commprof/commprof/trace"
)

type dumpOptions struct {
	rank   int
	kind   string
	limit  int
	format string
}

func newDumpCmd() *cobra.Command {
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
			return runDump(cmd.OutOrStdout(), cmd.ErrOrStderr(), o, args[0], cmd.Flags().Changed("rank"))
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.rank, "rank", 0, "only this rank's events")
	f.StringVar(&o.kind, "kind", "", "only events of this kind: collective, send, recv, compute, step, mark, wait or reduce")
	f.IntVar(&o.limit, "limit", 0, "print at most this many events (0: all)")
	f.StringVar(&o.format, "format", "table", "table, json or csv")
	return cmd
}

func runDump(stdout, stderr io.Writer, o *dumpOptions, dir string, rankSet bool) error {
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

// eventJSON is an event with the trace's column names.
type eventJSON struct {
	Rank  int32   `json:"rank"`
	Kind  string  `json:"kind"`
	Name  string  `json:"name"`
	Start int64   `json:"start_ns"`
	Dur   int64   `json:"dur_ns"`
	Bytes int64   `json:"bytes"`
	Peer  int32   `json:"peer"`
	Seq   int64   `json:"seq"`
	Step  int32   `json:"step"`
	Algo  string  `json:"algo"`
	DType string  `json:"dtype"`
	Root  int32   `json:"root"`
	Chunk int32   `json:"chunk"`
	Comm  string  `json:"comm"`
	Wait  int64   `json:"wait_ns"`
	Value float64 `json:"value"`
}

func writeJSON(w io.Writer, evs []trace.Event) error {
	out := make([]eventJSON, len(evs))
	for i, e := range evs {
		out[i] = eventJSON{e.Rank, e.Kind.String(), e.Name, e.Start, e.Dur, e.Bytes, e.Peer, e.Seq, e.Step, e.Algo, e.DType, e.Root, e.Chunk, e.Comm, e.Wait, e.Value}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(out)
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

func writeTable(w io.Writer, evs []trace.Event) error {
	fmt.Fprintf(w, "%4s %-10s %-14s %14s %11s %11s %4s %6s %5s %-18s %-7s %4s %5s %-8s %10s %s\n",
		"rank", "kind", "name", "start_ns", "dur_ns", "bytes", "peer", "seq", "step", "algo", "dtype", "root", "chunk", "comm", "wait_ns", "value")
	for _, e := range evs {
		if _, err := fmt.Fprintf(w, "%4d %-10s %-14s %14d %11d %11d %4d %6d %5d %-18s %-7s %4d %5d %-8s %10d %g\n",
			e.Rank, e.Kind, printable(e.Name), e.Start, e.Dur, e.Bytes, e.Peer, e.Seq, e.Step, printable(e.Algo),
			printable(e.DType), e.Root, e.Chunk, printable(e.Comm), e.Wait, e.Value); err != nil {
			return err
		}
	}
	return nil
}
