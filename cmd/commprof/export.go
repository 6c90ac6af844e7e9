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
	force  bool
}

// exportFormat is one format export writes.
type exportFormat struct {
	name  string
	file  string                            // default file name in the run directory
	write func(io.Writer, *trace.Run) error // nil for parquet, which writes a directory
	next  func(path string) string          // how to open the file
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
	{"parquet", "parquet", nil,
		func(p string) string {
			return "duckdb -c \"SELECT kind, count(*) FROM read_parquet('" + p + "/**/*.parquet', hive_partitioning = true) GROUP BY kind\" (docs/export.md has the SQL of the main figures)"
		}},
}

func newExportCmd(ios *iostreams.IOStreams) *cobra.Command {
	o := &exportOptions{}
	cmd := &cobra.Command{
		Use:   "export RUN --format perfetto|pprof|csv|parquet [-o FILE|DIR]",
		Short: "Write a run as a Perfetto trace, a pprof profile, CSV or Parquet",
		Long:  help("export"),
		Example: `  commprof export runs/bs64 --format perfetto
  commprof export runs/bs64 --format pprof -o bs64.pb.gz && go tool pprof -top bs64.pb.gz
  commprof export runs/bs64 --format csv -o - | head
  commprof export runs/bs64 --format parquet -o /data/bs64`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExport(cmd.Context(), ios, o, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "", "perfetto, pprof, csv or parquet (required)")
	f.StringVarP(&o.out, "out", "o", "", "output file, - for standard output (default RUN/perfetto.json, RUN/comm.pb.gz or RUN/events.csv); for parquet a directory (default RUN/parquet)")
	f.BoolVar(&o.force, "force", false, "parquet: write into a directory that is not empty, replacing the Parquet files in it")
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
	if o.force && format.write != nil {
		return usagef("--force is for --format parquet, which writes a directory; %s replaces its file whole", format.name)
	}
	out := o.out
	if out == "" {
		out = filepath.Join(dir, format.file)
	}
	if format.write == nil {
		return runExportParquet(ctx, ios, o, dir, out, format)
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

// runExportParquet writes the run as a Parquet table in directory out,
// streaming it rank by rank (export.Parquet).
func runExportParquet(ctx context.Context, ios *iostreams.IOStreams, o *exportOptions, dir, out string, format *exportFormat) error {
	if out == "-" {
		return usagef("-o -: a Parquet export is a directory of files (rank=N/%s), not a stream; give a directory", export.ParquetFile)
	}
	rf, err := trace.OpenRun(dir)
	if err != nil {
		return err
	}
	for _, p := range rf.Problems {
		fmt.Fprintf(ios.ErrOut, "commprof: warning: %v\n", p)
	}
	res, err := export.Parquet(ctx, rf, out, export.ParquetOptions{
		Force: o.force,
		Warn:  func(err error) { fmt.Fprintf(ios.ErrOut, "commprof: warning: %v\n", err) },
	})
	if err != nil {
		return fmt.Errorf("exporting %s as parquet: %w", dir, err)
	}
	fmt.Fprintf(ios.Out, "exported %s: %d events of %d ranks as parquet, %d files (rank=N/%s), %s in %s\n",
		dir, res.Rows, len(rf.Streams), res.Files, export.ParquetFile, units.Bytes(res.Bytes), out)
	fmt.Fprintf(ios.Out, "next: %s\n", format.next(out))
	return nil
}
