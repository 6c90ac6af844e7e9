package main

import (
	"bufio"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/driver"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/report"
)

type predictOptions struct {
	ranks  string
	algos  string
	check  string
	format string
	model  string
}

func newPredictCmd(ios *iostreams.IOStreams) *cobra.Command {
	o := &predictOptions{}
	cmd := &cobra.Command{
		Use:   "predict RUN [FIT_RUN...]",
		Short: "Project a run's allreduce time to more ranks with a fitted alpha-beta-gamma model",
		Long:  help("predict"),
		Example: `  commprof predict runs/train-4r --ranks 8,64,512,4096
  commprof predict runs/bench-2r runs/bench-4r --ranks 8 --check runs/bench-8r`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 {
				return usagef("%s takes at least one run", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPredict(cmd.Context(), ios, o, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.ranks, "ranks", "8,64,512,4096", "rank counts to project to, comma-separated")
	f.StringVar(&o.algos, "algo", strings.Join(analyze.AllreduceAlgos, ","), "allreduce algorithms to compare, comma-separated")
	f.StringVar(&o.check, "check", "", "a measured run to compare the prediction against")
	f.StringVar(&o.format, "format", "table", "table or json")
	f.StringVar(&o.model, "model", "", "a model file from commprof calibrate, instead of fitting the runs")
	return cmd
}

func runPredict(ctx context.Context, ios *iostreams.IOStreams, o *predictOptions, dirs []string) error {
	stdout, stderr := ios.Out, ios.ErrOut
	if o.format != "table" && o.format != "json" {
		return usagef("--format %q: want table or json", o.format)
	}
	var ranks []int
	for _, f := range strings.Split(o.ranks, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return usagef("--ranks %q: want rank counts such as 8,64,512", o.ranks)
		}
		ranks = append(ranks, n)
	}
	var algos []string
	for _, a := range strings.Split(o.algos, ",") {
		a = strings.TrimSpace(a)
		if !slices.Contains(analyze.AllreduceAlgos, a) {
			return usagef("--algo %q: want some of %s", a, strings.Join(analyze.AllreduceAlgos, ", "))
		}
		algos = append(algos, a)
	}
	res, err := driver.Predict(ctx, driver.PredictOptions{Runs: dirs, Ranks: ranks, Algos: algos, Model: o.model, Check: o.check, Warn: stderr})
	if err != nil {
		return err
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if o.format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(res)
	}
	report.WritePrediction(w, dirs, res)
	return nil
}
