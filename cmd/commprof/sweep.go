package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/driver"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/interpose/torch"
	"github.com/commprof/commprof/report"
)

type sweepOptions struct {
	out        string
	batches    string
	rules      string
	warmup     string
	ranks      string
	repeat     int
	target     float64
	model      string
	project    int
	force      bool
	stdout     io.Writer
	stderr     io.Writer
	tty        bool // stderr is a terminal: a progress bar
	trainFlags []string
	// python is the command line of a PyTorch script swept instead of
	// the trainer (docs/torch.md): each run passes it --batch-size N.
	python []string
}

func newSweepCmd(ios *iostreams.IOStreams) *cobra.Command {
	o := &sweepOptions{}
	cmd := &cobra.Command{
		Annotations: map[string]string{takesProgram: "yes"},
		Use:         "sweep --out DIR --batch-sizes 64,128,... [--lr-scaling none,linear,sqrt] [--ranks 4] -- train [TRAIN FLAGS]",
		Short:       "Record the trainer over batch sizes, learning-rate rules and rank counts, and compare them",
		Long:        help("sweep"),
		Example: `  commprof sweep --out runs/bs --batch-sizes 64,128,256,512,1024,2048 -- train --data /usr/share/datasets/fashion-mnist --epochs 3
  commprof sweep --out runs/lr --batch-sizes 256,1024 --lr-scaling none,linear,sqrt --warmup-epochs 0,1 -- train --epochs 3`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.stdout, o.stderr, o.tty = ios.Out, ios.ErrOut, ios.IsStderrTTY()
			if cmd.ArgsLenAtDash() == 0 && len(args) > 1 && torch.IsPython(args) {
				o.python = args
				return runSweep(cmd.Context(), o)
			}
			if cmd.ArgsLenAtDash() != 0 || len(args) == 0 || args[0] != "train" {
				return usagef("sweep runs the trainer or a PyTorch script: commprof sweep [flags] -- train [train flags], or -- python3 train.py [its flags]")
			}
			o.trainFlags = args[1:]
			return runSweep(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.out, "out", "o", "", "directory of the sweep's runs (required)")
	f.StringVar(&o.batches, "batch-sizes", "64,128,256,512,1024,2048", "batch sizes per rank, comma-separated")
	f.StringVar(&o.rules, "lr-scaling", "none", "learning-rate rules, comma-separated: none, linear, sqrt")
	f.StringVar(&o.warmup, "warmup-epochs", "0", "warm-up epochs, comma-separated")
	f.StringVar(&o.ranks, "ranks", "4", "rank counts, comma-separated")
	f.IntVar(&o.repeat, "repeat", 1, "runs of each configuration")
	f.Float64Var(&o.target, "target", 0, "test accuracy to time (default: 90% of the best any run reached, rounded down to 0.5%)")
	f.StringVar(&o.model, "model", "", "a model file from commprof calibrate, to project the allreduces to --project ranks")
	f.IntVar(&o.project, "project", 128, "rank count to project to with --model")
	f.BoolVar(&o.force, "force", false, "record again the finished runs in --out that were recorded with other train flags")
	return cmd
}

// sweepRun is one configuration and repeat of a sweep.
func splitInts(flag, s string, lo int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo {
			return nil, usagef("--%s %q: want whole numbers of %d or more, comma-separated", flag, s, lo)
		}
		out = append(out, n)
	}
	return out, nil
}

func runSweep(ctx context.Context, o *sweepOptions) error {
	if o.out == "" {
		return usagef("--out DIR is required: the sweep's runs go under it")
	}
	batches, err := splitInts("batch-sizes", o.batches, 1)
	if err != nil {
		return err
	}
	ranks, err := splitInts("ranks", o.ranks, 1)
	if err != nil {
		return err
	}
	var rules, warmups []string
	for _, r := range strings.Split(o.rules, ",") {
		r = strings.TrimSpace(r)
		if r != "none" && r != "linear" && r != "sqrt" {
			return usagef("--lr-scaling %q: want none, linear or sqrt, comma-separated", o.rules)
		}
		rules = append(rules, r)
	}
	for _, w := range strings.Split(o.warmup, ",") {
		w = strings.TrimSpace(w)
		if v, err := strconv.ParseFloat(w, 64); err != nil || v < 0 {
			return usagef("--warmup-epochs %q: want epochs of 0 or more, comma-separated", o.warmup)
		}
		warmups = append(warmups, w)
	}
	if o.repeat < 1 {
		return usagef("--repeat %d: want 1 or more", o.repeat)
	}
	if o.python != nil {
		if o.rules != "none" || o.warmup != "0" {
			return usagef("--lr-scaling and --warmup-epochs are the trainer's: a PyTorch script sets its own learning rate")
		}
		for _, f := range o.python[1:] {
			if f == "--batch-size" || strings.HasPrefix(f, "--batch-size=") {
				return usagef("%s flag %s: the sweep passes each run's --batch-size", o.python[0], f)
			}
		}
	}
	for _, f := range o.trainFlags {
		for _, owned := range []string{"--batch-size", "--lr-scaling", "--warmup-epochs", "--ranks", "-n"} {
			if f == owned || strings.HasPrefix(f, owned+"=") {
				return usagef("train flag %s: the sweep sets it from its own flags", f)
			}
		}
	}
	// Scale the learning rate from the sweep's smallest global batch,
	// unless the train flags say otherwise.
	base := "--lr-base-batch=" + strconv.Itoa(slices.Min(batches)*slices.Min(ranks))
	for _, f := range o.trainFlags {
		if f == "--lr-base-batch" || strings.HasPrefix(f, "--lr-base-batch=") {
			base = ""
		}
	}
	var fit *analyze.Fit
	if o.model != "" {
		m, err := readModel(o.model)
		if err != nil {
			return err
		}
		f := m.Fit
		f.Source = o.model
		fit = &f
	}
	// A finished run is kept only when it was recorded with the command
	// this sweep would record it with: the directory's name does not hold
	// the train flags (--epochs, --data, --lr) or the computed
	// --lr-base-batch.
	programArgs := func(r driver.SweepRun) []string {
		if o.python != nil {
			return append(slices.Clone(o.python), "--batch-size", strconv.Itoa(r.Batch))
		}
		args := []string{"train", "--quiet", "--batch-size", strconv.Itoa(r.Batch), "--lr-scaling", r.Rule, "--warmup-epochs", r.Warmup}
		if base != "" {
			args = append(args, base)
		}
		return append(args, o.trainFlags...)
	}
	plan := driver.SweepPlan(ranks, batches, rules, warmups, o.repeat)
	prog := newSweepProgress(o.stderr, o.tty)
	res, err := driver.Sweep(ctx, driver.SweepOptions{Out: o.out, Plan: plan, ProgramArgs: programArgs, Force: o.force,
		Target: o.target, Fit: fit, Project: o.project, Progress: prog, Log: o.stderr, Todo: prog.setTotal})
	prog.finish()
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	sw, failed := res.Sweep, res.Failed
	t := report.SweepTable(sw)
	fmt.Fprintf(o.stdout, "%s\n", t.Title)
	if err := t.WriteText(o.stdout); err != nil {
		return err
	}
	if sw.Noise != "" {
		fmt.Fprintf(o.stdout, "- %s\n", sw.Noise)
	}
	for _, f := range sw.Findings {
		fmt.Fprintf(o.stdout, "- %s\n", f)
	}
	fmt.Fprintf(o.stdout, "\nwrote %s and %s\n", res.JSONPath, res.PagePath)
	for _, f := range failed {
		fmt.Fprintf(o.stderr, "commprof: warning: %s\n", f)
	}
	switch {
	case res.Interrupted:
		return fmt.Errorf("sweep interrupted; run the same command again to finish it: %w", context.Canceled)
	case len(failed) > 0:
		return fmt.Errorf("%d of %d runs failed", len(failed), len(plan))
	}
	return nil
}

// sweepProgress shows a sweep's progress: a bar on a terminal, a line per
// run otherwise (a log, CI).
type sweepProgress struct {
	w     io.Writer
	tty   bool
	bar   *progressbar.ProgressBar
	n, of int
	t0    time.Time
}

func newSweepProgress(w io.Writer, tty bool) *sweepProgress { return &sweepProgress{w: w, tty: tty} }

// setTotal is told how many runs the sweep records.
func (p *sweepProgress) setTotal(of int) {
	p.of = of
	if p.tty && of > 0 {
		p.bar = progressbar.NewOptions(of, progressbar.OptionSetWriter(p.w), progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true), progressbar.OptionSetElapsedTime(true), progressbar.OptionFullWidth(),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.w) }))
	}
}

func (p *sweepProgress) Start(what string) {
	p.t0 = time.Now()
	if p.bar != nil {
		p.bar.Describe(what)
	}
}

func (p *sweepProgress) Done(what string, err error) {
	p.n++
	if p.bar != nil {
		_ = p.bar.Add(1)
		return
	}
	status := "done"
	if err != nil {
		status = "failed"
	}
	fmt.Fprintf(p.w, "sweep: [%d/%d] %s: %s in %s\n", p.n, p.of, what, status, time.Since(p.t0).Round(100*time.Millisecond))
}

func (p *sweepProgress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
