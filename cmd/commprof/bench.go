package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/bench"
	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/driver"
	"github.com/commprof/commprof/inject"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/rankrun"
)

type benchOptions struct {
	argv     []string // the whole command line, to start the ranks with
	ranks    int
	min, max string
	factor   int64
	algo     string
	iters    int
	warmup   int
	check    int
	dtype    string
	reduce   string
	root     int
	json     bool
	tune     string
	inject   []string

	stdout, stderr io.Writer
	tty            bool // stderr is a terminal
}

func newBenchCmd(argv []string, ios *iostreams.IOStreams) *cobra.Command {
	o := &benchOptions{argv: argv}
	cmd := &cobra.Command{
		Use:   "bench allreduce|broadcast|reduce|allgather|reducescatter",
		Short: "Measure a collective over a range of sizes, like nccl-tests",
		Long:  help("bench"),
		Example: `  commprof bench allreduce --ranks 4
  commprof bench broadcast --ranks 8 --min 1K --max 16M --algo chain
  commprof bench allreduce --ranks 4 -b 8 -e 128M -f 2 -n 50 -w 10 -c 0   # nccl-tests' flags
  mpirun -np 4 commprof bench allreduce --json`,
		Args:      exactArgs(1),
		ValidArgs: []string{"allreduce", "broadcast", "reduce", "allgather", "reducescatter"},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.stdout, o.stderr, o.tty = ios.Out, ios.ErrOut, ios.IsStderrTTY()
			return runBench(cmd.Context(), o, args[0], cmd.Flags().Changed("ranks"))
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.ranks, "ranks", 4, "number of local ranks to start (ignored under an external launcher, which sets the count)")
	// The one-letter flags are nccl-tests' own, with their meanings.
	f.StringVarP(&o.min, "min", "b", "8", "smallest size in bytes (K, M, G suffixes)")
	f.StringVarP(&o.max, "max", "e", "64M", "largest size in bytes")
	f.Int64VarP(&o.factor, "factor", "f", 4, "size multiplier between rows")
	f.StringVarP(&o.algo, "algo", "a", "auto", "algorithm: auto, ring, recursive_doubling, rabenseifner, tree or chain")
	f.IntVarP(&o.iters, "iters", "n", 20, "timed iterations per size")
	f.IntVarP(&o.warmup, "warmup", "w", 5, "untimed iterations per size")
	f.IntVarP(&o.check, "check", "c", 1, "check the results: 1 checks every warm-up iteration and one after the timed ones, 0 checks none")
	f.StringVarP(&o.dtype, "dtype", "d", "float32", "element type: float32, float64, int32 or int64")
	f.StringVarP(&o.reduce, "op", "o", "sum", "reduction: sum, max or min")
	f.IntVarP(&o.root, "root", "r", 0, "root rank of broadcast and reduce")
	f.BoolVar(&o.json, "json", false, "print the results as JSON")
	f.StringVar(&o.tune, "tune", "", "algorithm thresholds, e.g. allreduce_rd_max=32K,segment=1M (see docs/collectives.md)")
	injectFlag(cmd, &o.inject)
	cmd.AddCommand(newBenchReadCmd(ios))
	return cmd
}

func (o *benchOptions) spec(opName string) (bench.Spec, collectives.Config, error) {
	var s bench.Spec
	var cfg collectives.Config
	op, err := collectives.ParseOp(opName)
	if err != nil {
		return s, cfg, usageError{Err: err}
	}
	min, err := collectives.ParseSize(o.min)
	if err != nil {
		return s, cfg, usagef("--min: %v", err)
	}
	max, err := collectives.ParseSize(o.max)
	if err != nil {
		return s, cfg, usagef("--max: %v", err)
	}
	dt, err := collectives.ParseDType(o.dtype)
	if err != nil {
		return s, cfg, usagef("--dtype: %v", err)
	}
	rop, err := collectives.ParseReduceOp(o.reduce)
	if err != nil {
		return s, cfg, usagef("--op: %v", err)
	}
	algo, err := collectives.ParseAlgo(o.algo)
	if err != nil {
		return s, cfg, usagef("--algo: %v", err)
	}
	cfg.Algorithms = map[collectives.Op]collectives.Algo{op: algo}
	cfg.Tuning = collectives.DefaultTuning()
	if err := cfg.Tuning.Set(o.tune); err != nil {
		return s, cfg, usagef("--tune: %v", err)
	}
	if algo != collectives.AlgoAuto {
		ok := false
		for _, a := range collectives.Algorithms(op) {
			ok = ok || a == algo
		}
		if !ok {
			return s, cfg, usagef("--algo: %s has no %s algorithm (have %v)", op, algo, collectives.Algorithms(op))
		}
	}
	if o.check != 0 && o.check != 1 {
		return s, cfg, usagef("--check %d: want 1 (check) or 0 (do not)", o.check)
	}
	s = bench.Spec{Op: op, Min: min, Max: max, Factor: o.factor, Iters: o.iters, Warmup: o.warmup, DType: dt, Reduce: rop, Root: o.root,
		NoCheck: o.check == 0}
	if err := s.Validate(); err != nil {
		return s, cfg, usageError{Err: err}
	}
	return s, cfg, nil
}

func runBench(ctx context.Context, o *benchOptions, opName string, ranksSet bool) error {
	s, cfg, err := o.spec(opName)
	if err != nil {
		return err
	}
	faults, err := driver.FaultsOf(o.inject)
	if err != nil {
		return err
	}
	job, isRank, err := thisRank(o.ranks, ranksSet)
	if err != nil {
		return err
	}
	if !isRank {
		if o.root >= o.ranks || o.root < 0 {
			return usagef("--root %d is not one of the %d ranks", o.root, o.ranks)
		}
		if err := inject.Check(faults, o.ranks); err != nil {
			return usageError{Err: err}
		}
		return rankrun.Start(ctx, o.ranks, o.argv, nil, o.stdout, o.stderr, o.tty)
	}
	config := map[string]string{"program": "bench", "op": s.Op.String(), "algo": o.algo, "dtype": o.dtype,
		"reduce": o.reduce, "min": o.min, "max": o.max, "iters": fmt.Sprint(o.iters), "ranks": fmt.Sprint(job.Size)}
	return driver.Bench(ctx, driver.BenchOptions{Job: job, Collectives: cfg, Spec: s, Config: config, Faults: faults,
		Algo: o.algo, JSON: o.json, Stdout: o.stdout, Version: versionString()})
}
