package main

import (
	"bufio"
	"context"
	"fmt"
	"slices"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/export"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/load"
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
		Long:  help("dump"),
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
			return usageError{Err: fmt.Errorf("--kind: %w", err)}
		}
		kind = k
	}
	if o.limit < 0 {
		return usagef("--limit %d: want 0 or more", o.limit)
	}
	var only func(int) bool
	if rankSet {
		only = func(r int) bool { return r == o.rank }
	}
	evs, sc, err := load.Head(context.Background(), dir, only, func(e *trace.Event) bool { return kind == 0 || e.Kind == kind }, o.limit)
	if err != nil {
		return err
	}
	for _, p := range sc.Problems {
		fmt.Fprintf(stderr, "commprof: warning: %v\n", p)
	}
	if rankSet && !slices.Contains(sc.Ranks, o.rank) {
		return fmt.Errorf("run %s has no rank %d (it has %d ranks)", dir, o.rank, len(sc.Ranks))
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	switch o.format {
	case "json":
		return export.EventsJSON(w, evs)
	case "csv":
		return export.CSVEvents(w, evs)
	}
	return export.EventsTable(w, evs)
}
