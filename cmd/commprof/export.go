package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/driver"
	"github.com/commprof/commprof/internal/iostreams"
)

type exportOptions struct {
	format string
	out    string
	force  bool
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
	return driver.Export(ctx, driver.ExportOptions{Run: dir, Format: o.format, Out: o.out, Force: o.force, Stdout: ios.Out, Stderr: ios.ErrOut})
}
