package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

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

func runSweep(ctx context.Context, o *sweepOptions) error {
	opts, err := driver.PlanSweep(driver.SweepSpec{Out: o.out, Batches: o.batches, Rules: o.rules, Warmups: o.warmup, Ranks: o.ranks,
		Repeat: o.repeat, Target: o.target, Model: o.model, Project: o.project, Force: o.force, TrainFlags: o.trainFlags, Python: o.python})
	if err != nil {
		return err
	}
	plan := opts.Plan
	prog := newSweepProgress(o.stderr, o.tty)
	opts.Progress, opts.Log, opts.Todo = prog, o.stderr, prog.setTotal
	res, err := driver.Sweep(ctx, opts)
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
