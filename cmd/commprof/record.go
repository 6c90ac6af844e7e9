package main

import (
	"strings"

	"github.com/commprof/commprof/driver"
	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/spf13/cobra"
)

func newRecordCmd(argv []string, ios *iostreams.IOStreams) *cobra.Command {
	o := &driver.RecordOptions{Argv: argv, Version: versionString()}
	cmd := &cobra.Command{
		Annotations: map[string]string{takesProgram: "yes"},
		Use:         "record [--ranks N] [--out DIR] [--name NAME] -- COMMAND [ARGS...]",
		Short:       "Record every collective and message of a job into a run directory",
		Long:        help("record"),
		Example: `  commprof record --ranks 4 -- bench allreduce
  commprof record --out runs/mpi -- mpirun -np 4 commprof bench allreduce
  commprof record --out runs/mine -- mpirun -np 4 python3 train.py
  commprof record --ranks 2 -- python3 examples/torch/train_ddp.py --epochs 1`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Stdin, o.Stdout, o.Stderr, o.TTY = ios.In, ios.Out, ios.ErrOut, ios.IsStderrTTY()
			if len(args) == 0 {
				return usagef("record needs a command after --, e.g. commprof record --ranks 4 -- bench allreduce")
			}
			if cmd.ArgsLenAtDash() != 0 {
				return usagef("put the command to record after --: commprof record [flags] -- %s", strings.Join(args, " "))
			}
			return driver.Record(cmd.Context(), o, args)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&o.Ranks, "ranks", "n", 4, "local ranks to start, for a commprof command")
	f.StringVarP(&o.Out, "out", "o", "", "run directory (default runs/NAME-YYYYMMDD-HHMMSS)")
	f.StringVar(&o.Name, "name", "", "run name (default from the command, e.g. bench-allreduce)")
	f.StringVar(&o.Codec, "codec", "zstd", "trace compression: zstd, lz4 or none")
	f.BoolVar(&o.Force, "force", false, "replace the run already in --out (never another kind of file, nor a run being recorded); a run that failed before recording any event is replaced without it")
	f.StringVar(&o.MPI, "mpi", "", "the MPI a launched program uses, openmpi or mpich (default: from the launcher)")
	f.StringVar(&o.Sample, "sample", "", "how often each rank samples its memory, CPU time and energy: a period (100ms), a rate (10hz) or off (default 100ms, or $"+envnames.Sample+")")
	injectFlag(cmd, &o.Inject)
	stallFlags(cmd, &o.Stall)
	return cmd
}
