package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/commprof/commprof/driver"
	"github.com/commprof/commprof/inject"
	"github.com/commprof/commprof/internal/iostreams"
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
type usageError = driver.UsageError

func usagef(format string, a ...any) error { return driver.Usagef(format, a...) }

// run builds the command tree, runs it and maps its error to an exit
// status. Errors are printed here, once.
func run(args []string, ios *iostreams.IOStreams) int {
	stderr := ios.ErrOut
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root := newRootCmd(args, ios)
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

func newRootCmd(args []string, ios *iostreams.IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "commprof",
		Short: "Communication profiler for distributed deep-learning training",
		Long: `commprof records every collective and every message of a distributed
training job, on every rank, and turns the traces into timelines, heatmaps,
tables and diffs.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.PersistentPreRun = func(c *cobra.Command, _ []string) {
		if slices.Contains(analysisCommands, c.Name()) {
			limitMemory()
		}
	}
	root.SetIn(ios.In)
	root.SetOut(ios.Out)
	root.SetErr(ios.ErrOut)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if hint := programFlagsHint(c, args); hint != "" {
			return usagef("%v\n%s", err, hint)
		}
		if s := suggestFlags(c, err); len(s) > 0 {
			return usagef("%v\nDid you mean %s?", err, strings.Join(s, " or "))
		}
		return usageError{Err: err}
	})
	root.AddCommand(newVersionCmd(ios), newBenchCmd(args, ios), newRecordCmd(args, ios), newDumpCmd(ios), newTrainCmd(args, ios),
		newStatsCmd(ios), newDiffCmd(ios), newPredictCmd(ios), newReportCmd(ios), newExportCmd(ios), newServeCmd(ios),
		newCalibrateCmd(ios), newSweepCmd(ios), newImportCmd(ios), newDoctorCmd(ios))
	root.AddCommand(&cobra.Command{Use: inject.HelperArg, Hidden: true, DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error { return inject.RunHelper(cmd.Context(), args) }})
	return root
}

// analysisCommands are the commands that read runs; they keep their heap
// near analysisMemory.
var analysisCommands = []string{"stats", "report", "diff", "serve", "sweep", "export", "predict", "doctor"}

// analysisMemory is the soft limit on the heap of a command that reads
// runs: the Go collector works harder as the heap nears it, instead of
// letting the heap grow to twice what is live, so that a 100M-event run
// is summarized in under 1 GB (docs/benchmarks.md). A run whose summary
// needs more goes over it, at the cost of more collections. GOMEMLIMIT
// set in the environment replaces it.
const analysisMemory = 768 << 20

func limitMemory() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(analysisMemory)
	}
}

// takesProgram marks the commands that run a program given after --.
const takesProgram = "takes-program"

// programFlagsHint, for a command that runs a program after --, shows
// args rewritten with the program and its flags after --: the usual
// mistake behind an unknown flag there (commprof record train --epochs 1).
func programFlagsHint(c *cobra.Command, args []string) string {
	if c.Annotations[takesProgram] == "" || slices.Contains(args, "--") {
		return ""
	}
	// Skip the command's path, then keep its own flags (and their
	// values) until the first word that is not one.
	i := 0
	for _, name := range strings.Fields(c.CommandPath())[1:] {
		for i < len(args) && args[i] != name {
			i++
		}
		i++
	}
	var own []string
	for i < len(args) {
		a := args[i]
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		var f *pflag.Flag
		switch {
		case strings.HasPrefix(a, "--"):
			f = c.Flags().Lookup(name)
		case strings.HasPrefix(a, "-") && len(name) == 1:
			f = c.Flags().ShorthandLookup(name)
		}
		if f == nil {
			break
		}
		own = append(own, a)
		i++
		if !hasValue && f.Value.Type() != "bool" && i < len(args) {
			own = append(own, args[i])
			i++
		}
	}
	if i >= len(args) || strings.HasPrefix(args[i], "-") {
		return "" // a flag of the command's own, mistyped: no program
	}
	line := append(append(strings.Fields(c.CommandPath()), own...), "--")
	return fmt.Sprintf("The program's own flags go after --: %s", strings.Join(append(line, args[i:]...), " "))
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

// suggestFlags, for an unknown flag (pflag's "unknown flag: --rank", or
// "unknown shorthand flag: 'r' in -rank" for a single dash), returns the
// command's flags whose names are within two edits of it or begin with
// it: cobra suggests mistyped commands, not flags.
func suggestFlags(c *cobra.Command, err error) []string {
	msg := err.Error()
	typed, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		_, after, found := strings.Cut(msg, " in -")
		if !strings.HasPrefix(msg, "unknown shorthand flag: ") || !found || len(after) < 2 {
			return nil
		}
		typed = after
	}
	typed, _, _ = strings.Cut(typed, "=")
	var out []string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == typed {
			return
		}
		if d := editDistance(typed, f.Name); d <= 2 && d < len(f.Name) || (len(typed) >= 3 && strings.HasPrefix(f.Name, typed)) {
			out = append(out, "--"+f.Name)
		}
	})
	return out
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
