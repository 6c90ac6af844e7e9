package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/driver"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/internal/units"
)

type calibrateOptions struct {
	ranks  string
	algos  string
	min    string
	max    string
	factor int64
	iters  int
	out    string
	keep   string
}

func newCalibrateCmd(ios *iostreams.IOStreams) *cobra.Command {
	o := &calibrateOptions{}
	cmd := &cobra.Command{
		Use:   "calibrate [--ranks 2,4] [-o model.json]",
		Short: "Measure this machine's collectives and fit the alpha-beta-gamma model predict and report use",
		Long:  help("calibrate"),
		Example: `  commprof calibrate -o model.json
  commprof predict runs/train-4r --model model.json --ranks 8,64,512`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCalibrate(cmd.Context(), ios, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.ranks, "ranks", "2,4", "rank counts to measure, comma-separated")
	f.StringVar(&o.algos, "algos", "ring,recursive_doubling,rabenseifner", "allreduce algorithms to measure")
	f.StringVar(&o.min, "min", "32K", "smallest size")
	f.StringVar(&o.max, "max", "16M", "largest size")
	f.Int64Var(&o.factor, "factor", 2, "size multiplier between sizes")
	f.IntVar(&o.iters, "iters", 20, "timed iterations per size")
	f.StringVarP(&o.out, "output", "o", "model.json", "model file to write")
	f.StringVar(&o.keep, "keep", "", "keep the calibration runs in this directory (default: a temporary one, removed)")
	return cmd
}

func runCalibrate(ctx context.Context, ios *iostreams.IOStreams, o *calibrateOptions) error {
	stdout, stderr := ios.Out, ios.ErrOut
	var ranks []int
	for _, f := range strings.Split(o.ranks, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 || n > 1024 {
			return usagef("--ranks %q: want rank counts of 2 or more, such as 2,4", o.ranks)
		}
		ranks = append(ranks, n)
	}
	var algos []string
	for _, a := range strings.Split(o.algos, ",") {
		a = strings.TrimSpace(a)
		alg, err := collectives.ParseAlgo(a)
		if err != nil || !validFor(collectives.OpAllReduce, alg) {
			return usagef("--algos %q: want allreduce algorithms such as ring,recursive_doubling,rabenseifner", o.algos)
		}
		algos = append(algos, a)
	}
	lo, err1 := collectives.ParseSize(o.min)
	hi, err2 := collectives.ParseSize(o.max)
	if err1 != nil || err2 != nil || lo <= 0 || hi < 16*lo || o.factor < 2 || o.iters < 1 {
		return usagef("--min %s --max %s --factor %d --iters %d: want sizes spanning 16x or more, a factor of 2 or more and at least 1 iteration",
			o.min, o.max, o.factor, o.iters)
	}
	start := time.Now()
	m, err := driver.Calibrate(ctx, driver.CalibrateOptions{Ranks: ranks, Algos: algos, Min: o.min, Max: o.max, MinBytes: lo, MaxBytes: hi,
		Factor: o.factor, Iters: o.iters, Out: o.out, Keep: o.keep, Version: versionString()}, stderr)
	if err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	fit := m.Fit
	fmt.Fprintf(stdout, "wrote %s in %s: alpha %s, beta %.4g ns/byte (%s), gamma %.4g ns/byte, over %d calls of %d sizes on %v ranks; R² %.3f, median error %s\n",
		o.out, time.Since(start).Round(time.Second), units.Duration(fit.AlphaNS), fit.BetaNSPerB, units.GBps(fit.LinkGBps), fit.GammaNSPerB,
		fit.Calls, fit.Sizes, fit.RankCounts, fit.CallR2, units.Percent(fit.MedianError, 0))
	fmt.Fprintf(stdout, "use it: commprof predict RUN --model %s, commprof report RUN --model %s\n", o.out, o.out)
	return nil
}

// validFor reports whether algo is one of op's algorithms.
func validFor(op collectives.Op, algo collectives.Algo) bool {
	for _, a := range collectives.Algorithms(op) {
		if a == algo {
			return true
		}
	}
	return false
}
