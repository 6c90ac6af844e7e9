package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/inject"
	"github.com/commprof/commprof/launch"
)

// Exit statuses.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// usageError marks errors in how the command was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// run builds the command tree, runs it and maps its error to an exit
// status. Errors are printed here, once.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd(args, stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "commprof: %v\n", err)
	var ue usageError
	var re *launch.RankError
	switch {
	case errors.Is(err, context.Canceled) || ctx.Err() != nil:
		return exitInterrupted
	case errors.As(err, &ue):
		path := "commprof"
		if cmd != nil {
			path = cmd.CommandPath()
		}
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", path)
		return exitUsage
	case errors.As(err, &re):
		if re.ExitCode > 0 {
			return re.ExitCode
		}
	}
	return exitError
}

func newRootCmd(args []string, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "commprof",
		Short: "Communication profiler for distributed deep-learning training",
		Long: `commprof records every collective and every message of a distributed
training job, on every rank, and turns the traces into timelines, heatmaps,
tables and diffs.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newVersionCmd(), newBenchCmd(args), newRecordCmd(args), newDumpCmd(), newTrainCmd(args), newStatsCmd(), newDiffCmd(), newPredictCmd(), newReportCmd())
	root.AddCommand(newExportCmd())
	root.AddCommand(newServeCmd(), newCalibrateCmd(), newSweepCmd())
	root.AddCommand(newImportCmd())
	root.AddCommand(&cobra.Command{Use: inject.HelperArg, Hidden: true, DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error { return inject.RunHelper(cmd.Context(), args) }})
	return root
}

// exactArgs is cobra.ExactArgs with a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %d argument(s), got %d", cmd.CommandPath(), n, len(args))
		}
		return nil
	}
}
