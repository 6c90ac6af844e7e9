package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/export"
	"github.com/commprof/commprof/internal/atomicfile"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/trace"
)

type exportOptions struct {
	format string
	out    string
}

// exportFormat is one format export writes.
type exportFormat struct {
	name  string
	file  string // default file name in the run directory
	write func(io.Writer, *trace.Run) error
	next  func(path string) string // how to open the file
}

var exportFormats = []exportFormat{
	{"perfetto", "perfetto.json", export.Perfetto,
		func(p string) string { return "open https://ui.perfetto.dev and load " + p + " (Open trace file)" }},
	{"pprof", "comm.pb.gz", export.PProf,
		func(p string) string { return "go tool pprof -http=: " + p }},
	{"csv", "events.csv", export.CSV,
		func(p string) string {
			return "read " + p + " with pandas.read_csv, or in DuckDB: SELECT * FROM '" + p + "'"
		}},
}

func newExportCmd(ios *iostreams.IOStreams) *cobra.Command {
	o := &exportOptions{}
	cmd := &cobra.Command{
		Use:   "export RUN --format perfetto|pprof|csv [-o FILE]",
		Short: "Write a run as a Perfetto trace, a pprof profile or CSV",
		Long: `export writes a recorded run in another tool's format:

  perfetto  Chrome trace-event JSON for ui.perfetto.dev or chrome://tracing:
            one process per rank, a thread per track (steps, compute,
            collectives, sends, recvs, marks), an arrow per message
  pprof     a pprof profile of communication time, bytes and messages by
            rank > op > algorithm > peer > message size, for go tool pprof
  csv       one row per event with every column of the trace

The file is written next to itself and renamed into place, so a failed
export leaves no partial file; -o - writes to standard output. Problems with
the run (a cut stream, a missing rank) are reported on standard error and
the events that were recorded are exported. docs/export.md describes each
format.`,
		Example: `  commprof export runs/bs64 --format perfetto
  commprof export runs/bs64 --format pprof -o bs64.pb.gz && go tool pprof -top bs64.pb.gz
  commprof export runs/bs64 --format csv -o - | head`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExport(cmd.Context(), ios, o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "", "perfetto, pprof or csv (required)")
	f.StringVarP(&o.out, "out", "o", "", "output file, - for standard output (default RUN/perfetto.json, RUN/comm.pb.gz or RUN/events.csv)")
	return cmd
}

func runExport(ctx context.Context, ios *iostreams.IOStreams, o *exportOptions, dir string) error {
	stdout, stderr := ios.Out, ios.ErrOut
	var names []string
	var format *exportFormat
	for i := range exportFormats {
		names = append(names, exportFormats[i].name)
		if exportFormats[i].name == o.format {
			format = &exportFormats[i]
		}
	}
	if format == nil {
		if o.format == "" {
			return usagef("--format is required: %s", strings.Join(names, ", "))
		}
		return usagef("--format %q: want %s", o.format, strings.Join(names, ", "))
	}
	out := o.out
	if out == "" {
		out = filepath.Join(dir, format.file)
	}

	run, err := trace.ReadRun(dir)
	if err != nil {
		return err
	}
	for _, p := range run.Problems {
		fmt.Fprintf(stderr, "commprof: warning: %v\n", p)
	}

	var n int64
	if out == "-" {
		cw := atomicfile.NewCounter(ctx, stdout)
		if err := format.write(cw, run); err != nil {
			return fmt.Errorf("exporting %s as %s: %w", dir, format.name, err)
		}
		n = cw.N
		stdout = stderr // the summary must not mix with the data
	} else if n, err = atomicfile.Write(ctx, out, func(w io.Writer) error { return format.write(w, run) }); err != nil {
		return fmt.Errorf("exporting %s as %s: %w", dir, format.name, err)
	}

	fmt.Fprintf(stdout, "exported %s: %d events of %d ranks as %s, %s to %s\n",
		dir, run.NumEvents(), len(run.Ranks), format.name, units.Bytes(n), displayPath(out))
	if out != "-" {
		fmt.Fprintf(stdout, "next: %s\n", format.next(out))
	}
	return nil
}

func displayPath(p string) string {
	if p == "-" {
		return "standard output"
	}
	return p
}
