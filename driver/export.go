package driver

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/commprof/commprof/export"
	"github.com/commprof/commprof/internal/atomicfile"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/trace"
)

// ExportFormat is one format commprof export writes.
type ExportFormat struct {
	Name  string
	File  string                            // default file name in the run directory
	Write func(io.Writer, *trace.Run) error // nil for parquet, which writes a directory
	Next  func(path string) string          // how to open the file
}

var ExportFormats = []ExportFormat{
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

// ExportOptions say what Export writes.
type ExportOptions struct {
	Run    string // the run's directory
	Format string // perfetto, pprof, csv or parquet
	Out    string // a file, - for standard output, or parquet's directory ("": in the run's directory)
	Force  bool   // parquet: write into a directory that is not empty
	Stdout io.Writer
	Stderr io.Writer
}

// Export writes the run in o.Run in o.Format, and says what it wrote.
func Export(ctx context.Context, o ExportOptions) error {
	dir, stdout, stderr := o.Run, o.Stdout, o.Stderr
	var names []string
	var format *ExportFormat
	for i := range ExportFormats {
		names = append(names, ExportFormats[i].Name)
		if ExportFormats[i].Name == o.Format {
			format = &ExportFormats[i]
		}
	}
	if format == nil {
		if o.Format == "" {
			return Usagef("--format is required: %s", strings.Join(names, ", "))
		}
		return Usagef("--format %q: want %s", o.Format, strings.Join(names, ", "))
	}
	if o.Force && format.Write != nil {
		return Usagef("--force is for --format parquet, which writes a directory; %s replaces its file whole", format.Name)
	}
	out := o.Out
	if out == "" {
		out = filepath.Join(dir, format.File)
	}
	if format.Write == nil {
		return exportParquet(ctx, o, dir, out, format)
	}

	run, err := load.All(dir)
	if err != nil {
		return err
	}
	for _, p := range run.Problems {
		fmt.Fprintf(stderr, "commprof: warning: %v\n", p)
	}

	var n int64
	if out == "-" {
		cw := atomicfile.NewCounter(ctx, stdout)
		if err := format.Write(cw, run); err != nil {
			return fmt.Errorf("exporting %s as %s: %w", dir, format.Name, err)
		}
		n = cw.N
		stdout = stderr // the summary must not mix with the data
	} else if n, err = atomicfile.Write(ctx, out, func(w io.Writer) error { return format.Write(w, run) }); err != nil {
		return fmt.Errorf("exporting %s as %s: %w", dir, format.Name, err)
	}

	fmt.Fprintf(stdout, "exported %s: %d events of %d ranks as %s, %s to %s\n",
		dir, run.NumEvents(), len(run.Ranks), format.Name, units.Bytes(n), displayPath(out))
	if out != "-" {
		fmt.Fprintf(stdout, "next: %s\n", format.Next(out))
	}
	return nil
}

func displayPath(p string) string {
	if p == "-" {
		return "standard output"
	}
	return p
}

// exportParquet writes the run as a Parquet table in directory out,
// streaming it rank by rank (export.Parquet).
func exportParquet(ctx context.Context, o ExportOptions, dir, out string, format *ExportFormat) error {
	if out == "-" {
		return Usagef("-o -: a Parquet export is a directory of files (rank=N/%s), not a stream; give a directory", export.ParquetFile)
	}
	rf, err := load.Files(dir)
	if err != nil {
		return err
	}
	for _, p := range rf.Problems {
		fmt.Fprintf(o.Stderr, "commprof: warning: %v\n", p)
	}
	res, err := export.Parquet(ctx, rf, out, export.ParquetOptions{
		Force: o.Force,
		Warn:  func(err error) { fmt.Fprintf(o.Stderr, "commprof: warning: %v\n", err) },
	})
	if err != nil {
		return fmt.Errorf("exporting %s as parquet: %w", dir, err)
	}
	fmt.Fprintf(o.Stdout, "exported %s: %d events of %d ranks as parquet, %d files (rank=N/%s), %s in %s\n",
		dir, res.Rows, len(rf.Streams), res.Files, export.ParquetFile, units.Bytes(res.Bytes), out)
	fmt.Fprintf(o.Stdout, "next: %s\n", format.Next(out))
	return nil
}
