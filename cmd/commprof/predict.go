package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/load"
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
		Long: `predict fits the alpha-beta-gamma model to the recorded messages and
collective calls of RUN (and of any FIT_RUN given after it, pooled), then
projects RUN's allreduces - the same sizes, as often per step - to other
rank counts for each allreduce algorithm. With --check MEASURED_RUN it also
predicts that run's allreduces at its own rank count and prints the error
against what was measured. docs/metrics.md gives the formulas.`,
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

// predictResult is predict's JSON output.
type predictResult struct {
	Fit        analyze.Fit         `json:"fit"`
	Projection *analyze.Projection `json:"projection"`
	Check      *predictCheck       `json:"check,omitempty"`
}

type predictCheck struct {
	Run         string             `json:"run"`
	Ranks       int                `json:"ranks"`
	MeasuredNS  float64            `json:"measured_ns"`
	PredictedNS float64            `json:"predicted_ns"`
	Error       float64            `json:"error"` // (predicted - measured) / measured
	Calls       []analyze.CallSize `json:"calls"`
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
	var sums []*analyze.Summary
	for _, d := range dirs {
		s, err := load.Summary(ctx, d)
		if err != nil {
			return err
		}
		for _, p := range s.Problems {
			fmt.Fprintf(stderr, "commprof: warning: %s\n", p)
		}
		sums = append(sums, s)
	}
	fit := analyze.PooledFit(sums...)
	if o.model != "" {
		m, err := readModel(o.model)
		if err != nil {
			return err
		}
		fit = m.Fit
		fit.Source = o.model
	}
	if !fit.Usable {
		return fmt.Errorf("no projection: %s", fit.Reason)
	}
	res := predictResult{Fit: fit, Projection: sums[0].ProjectWith(fit, ranks, algos)}
	if res.Projection == nil {
		return fmt.Errorf("run %s has no allreduce on the world communicator: nothing to project", dirs[0])
	}
	if o.check != "" {
		m, err := load.Summary(ctx, o.check)
		if err != nil {
			return err
		}
		p := m.ProjectWith(fit, []int{m.Run.WorldSize}, nil)
		if p == nil {
			return fmt.Errorf("--check run %s has no allreduce on the world communicator", o.check)
		}
		c := &predictCheck{Run: o.check, Ranks: m.Run.WorldSize, MeasuredNS: p.Measured, PredictedNS: p.Modeled, Calls: p.Calls}
		if p.Measured > 0 {
			c.Error = (p.Modeled - p.Measured) / p.Measured
		}
		res.Check = c
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	if o.format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(res)
	}
	writePredict(w, dirs, res)
	return nil
}

func writePredict(w io.Writer, dirs []string, res predictResult) {
	f, p := res.Fit, res.Projection
	from := strings.Join(dirs, ", ")
	if f.Source != "run" && f.Source != "runs" {
		from = f.Source
	}
	fmt.Fprintf(w, "model from %s: %d collective calls of %d sizes on %v ranks\n", from, f.Calls, f.Sizes, f.RankCounts)
	fmt.Fprintf(w, "  alpha %s per step, beta %.4g ns/byte within a host (by message size where calibrated)", units.Duration(f.AlphaNS), f.BetaNSPerB)
	if f.AlphaNetNS > 0 || f.BetaNetNSPerB > 0 {
		fmt.Fprintf(w, "; alpha %s and beta %.4g ns/byte between hosts", units.Duration(f.AlphaNetNS), f.BetaNetNSPerB)
	}
	fmt.Fprintf(w, "; link %s; gamma %.4g ns/byte", units.GBps(f.LinkGBps), f.GammaNSPerB)
	if f.GammaFrom != "" {
		fmt.Fprintf(w, " (from %s)", f.GammaFrom)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  R² %.3f, median error %s over the calls it was fitted to\n", f.CallR2, units.Percent(f.MedianError, 0))
	fmt.Fprintf(w, "\n%s's allreduces at its %d ranks: measured %s per %s, model %s (%s)\n", dirs[0], p.Current,
		units.Duration(p.Measured), p.Basis, units.Duration(p.Modeled), relErr(p.Modeled, p.Measured))
	if p.Assumed != "" {
		fmt.Fprintf(w, "  (%s)\n", p.Assumed)
	}
	t := &report.Table{Title: "Projected allreduce time per " + p.Basis, Columns: []report.Column{{Name: "algorithm"}}}
	for _, r := range p.Ranks {
		t.Columns = append(t.Columns, report.Column{Name: fmt.Sprintf("%d ranks", r), Numeric: true})
	}
	for i, a := range p.Algos {
		row := []string{a}
		for j := range p.Ranks {
			row = append(row, units.Duration(p.TimeNS[i][j]))
		}
		t.Rows = append(t.Rows, row)
	}
	fmt.Fprintf(w, "\n%s\n", t.Title)
	t.WriteText(w)
	if c := res.Check; c != nil {
		fmt.Fprintf(w, "\ncheck against %s (%d ranks): measured %s, predicted %s (%s)\n", c.Run, c.Ranks,
			units.Duration(c.MeasuredNS), units.Duration(c.PredictedNS), relErr(c.PredictedNS, c.MeasuredNS))
		ct := &report.Table{Columns: []report.Column{{Name: "size", Numeric: true}, {Name: "algorithm"}, {Name: "calls", Numeric: true},
			{Name: "measured", Numeric: true}, {Name: "predicted", Numeric: true}, {Name: "error", Numeric: true}}}
		for _, cs := range c.Calls {
			ct.Rows = append(ct.Rows, []string{units.Bytes(cs.Bytes), cs.Algo, fmt.Sprintf("%.4g", cs.PerStep),
				units.Duration(cs.MeasuredNS), units.Duration(cs.ModeledNS), relErr(cs.ModeledNS, cs.MeasuredNS)})
		}
		ct.WriteText(w)
	}
}

func relErr(pred, meas float64) string {
	if meas == 0 || math.IsNaN(pred) {
		return "no measurement"
	}
	return fmt.Sprintf("%+.0f%%", 100*(pred-meas)/meas)
}
