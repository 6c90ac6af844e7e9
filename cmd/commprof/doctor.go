package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/report"
)

type doctorOptions struct {
	format string
}

func newDoctorCmd(ios *iostreams.IOStreams) *cobra.Command {
	o := &doctorOptions{}
	cmd := &cobra.Command{
		Use:   "doctor RUN",
		Short: "Explain a hung, failed or killed run: which rank is stuck where, and who called what",
		Long:  help("doctor"),
		Example: `  commprof doctor runs/mpi-train-20261127-101500
  commprof doctor --format json RUN | jq .culprits`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDoctor(cmd.Context(), ios, o, args[0])
		},
	}
	cmd.Flags().StringVar(&o.format, "format", "text", "text or json")
	return cmd
}

func runDoctor(ctx context.Context, ios *iostreams.IOStreams, o *doctorOptions, dir string) error {
	if o.format != "text" && o.format != "json" {
		return usagef("--format %q: want text or json", o.format)
	}
	d, problems, err := load.Diagnose(ctx, dir)
	if err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintf(ios.ErrOut, "commprof: warning: %v\n", p)
	}
	if o.format == "json" {
		enc := json.NewEncoder(ios.Out)
		enc.SetIndent("", " ")
		return enc.Encode(d)
	}
	return report.WriteDiagnosis(ios.Out, d)
}
