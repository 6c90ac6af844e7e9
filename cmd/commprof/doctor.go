package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/driver"
	"github.com/commprof/commprof/internal/iostreams"
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
		Long: `doctor reads a run (complete, failed, interrupted, killed or still hanging)
and says, for every rank, the call it is blocked in or last made; which ranks
hold the others up (the culprits); where ranks called different things at
the same call of a communicator (op, bytes, dtype, root, reduction op, or a
rank that never called it); and which ranks died.

It reads the ranks' traces, their in-flight state (inflight/ in the run,
which the ranks keep while they run) and run.json. An imported NCCL log is
matched across ranks by communicator and opCount. --format json prints an
object with culprits, ranks and mismatches (docs/doctor.md).

doctor exits 0 whatever it finds; a run it cannot read is an error.`,
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
	d, problems, err := driver.Diagnose(ctx, dir)
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
