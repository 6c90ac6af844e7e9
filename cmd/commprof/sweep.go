package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/interpose/torch"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/report"
	"github.com/commprof/commprof/trace"
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
		Long: `sweep records commprof train once for every combination of --batch-sizes,
--lr-scaling, --warmup-epochs and --ranks (--repeat times each), each as a
normal run under DIR, then compares them: test accuracy per epoch and at the
end, time per epoch, samples/s, time to a target accuracy, communication
bytes and exposed communication per sample, busbw, scaling efficiency
against the smallest rank count and, with --model, the allreduce time per
step projected to --project ranks. It prints a table and writes
DIR/sweep.json and DIR/sweep.html.

A sweep can be interrupted (Ctrl-C) and run again with the same flags:
finished runs are kept, not redone. A finished run recorded with other
train flags (--epochs 1, now --epochs 5) is not mixed in: the sweep stops
and names the flag; --force records such runs again.`,
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
type sweepRun struct {
	batch, ranks, rep int
	rule, warmup      string
}

func (r sweepRun) dir(out string) string {
	name := fmt.Sprintf("r%d-bs%d-lr%s-wu%s", r.ranks, r.batch, r.rule, r.warmup)
	if r.rep > 0 {
		name += fmt.Sprintf("-rep%d", r.rep+1)
	}
	return filepath.Join(out, name)
}

func (r sweepRun) String() string {
	s := fmt.Sprintf("%d ranks, batch %d, lr %s", r.ranks, r.batch, r.rule)
	if r.warmup != "0" {
		s += ", warm-up " + r.warmup
	}
	if r.rep > 0 {
		s += fmt.Sprintf(", repeat %d", r.rep+1)
	}
	return s
}

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
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("sweep: finding the commprof binary: %w", err)
	}
	var plan []sweepRun
	for _, n := range ranks {
		for _, rule := range rules {
			for _, w := range warmups {
				if rule == "none" && w != warmups[0] {
					continue // no rule, nothing to warm up to: the same run
				}
				for _, b := range batches {
					for rep := range o.repeat {
						plan = append(plan, sweepRun{batch: b, ranks: n, rep: rep, rule: rule, warmup: w})
					}
				}
			}
		}
	}
	// A finished run is kept only when it was recorded with the command
	// this sweep would record it with: the directory's name does not hold
	// the train flags (--epochs, --data, --lr) or the computed
	// --lr-base-batch.
	programArgs := func(r sweepRun) []string {
		if o.python != nil {
			return append(slices.Clone(o.python), "--batch-size", strconv.Itoa(r.batch))
		}
		args := []string{"train", "--quiet", "--batch-size", strconv.Itoa(r.batch), "--lr-scaling", r.rule, "--warmup-epochs", r.warmup}
		if base != "" {
			args = append(args, base)
		}
		return append(args, o.trainFlags...)
	}
	var todo []sweepRun
	var stale []string
	for _, r := range plan {
		m, err := trace.ReadManifest(r.dir(o.out))
		if err != nil || m.Status != trace.StatusComplete {
			todo = append(todo, r)
			continue
		}
		if why := recordedOtherwise(m, r.ranks, programArgs(r)); why != "" {
			stale = append(stale, filepath.Base(r.dir(o.out))+" was recorded "+why)
			todo = append(todo, r)
		}
	}
	if len(stale) > 0 && !o.force {
		more := ""
		if len(stale) > 1 {
			more = fmt.Sprintf(" (and %d more)", len(stale)-1)
		}
		return fmt.Errorf("%d finished runs in %s were recorded with other flags than this sweep's: %s%s; "+
			"record this sweep under another --out, run it with the flags it was recorded with, or add --force to record those runs again (replacing them)",
			len(stale), o.out, stale[0], more)
	}
	for _, s := range stale {
		fmt.Fprintf(o.stderr, "sweep: --force: recording again: %s\n", s)
	}
	fmt.Fprintf(o.stderr, "sweep: %d runs, %d already recorded in %s\n", len(plan), len(plan)-len(todo), o.out)
	prog := newSweepProgress(o.stderr, o.tty, len(todo))
	var failed []string
	for _, r := range todo {
		if ctx.Err() != nil {
			break
		}
		prog.start(r.String())
		args := append([]string{"record", "--force", "--ranks", strconv.Itoa(r.ranks), "--out", r.dir(o.out), "--"}, programArgs(r)...)
		err := runQuiet(ctx, exe, args, r.dir(o.out)+".log")
		if err != nil && ctx.Err() != nil {
			break
		}
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v (see %s.log)", r, err, r.dir(o.out)))
		}
		prog.done(r.String(), err)
	}
	prog.finish()
	interrupted := ctx.Err() != nil
	// Compare what there is, finished or not.
	var runs []analyze.SweepRun
	for _, r := range plan {
		d := r.dir(o.out)
		if m, err := trace.ReadManifest(d); err != nil || m.Status == trace.StatusInterrupted || m.Status == trace.StatusRunning {
			continue // not run yet, or cut short by the interrupt: redone next time
		}
		s, err := sweepRunReport(context.WithoutCancel(ctx), d)
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", r, err))
			continue
		}
		runs = append(runs, analyze.SweepRun{Dir: d, Summary: s})
	}
	target := o.target
	if target <= 0 {
		target = analyze.DefaultSweepTarget(runs)
	}
	sw := analyze.NewSweep(runs, target, fit, o.project)
	b, err := json.MarshalIndent(sw, "", " ")
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	if _, err := writeFileAtomic(context.WithoutCancel(ctx), filepath.Join(o.out, "sweep.json"), func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	}); err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	page := filepath.Join(o.out, "sweep.html")
	if _, err := writeFileAtomic(context.WithoutCancel(ctx), page, func(w io.Writer) error { return report.WriteSweepHTML(w, sw) }); err != nil {
		return fmt.Errorf("sweep: writing %s: %w", page, err)
	}
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
	fmt.Fprintf(o.stdout, "\nwrote %s and %s\n", filepath.Join(o.out, "sweep.json"), page)
	for _, f := range failed {
		fmt.Fprintf(o.stderr, "commprof: warning: %s\n", f)
	}
	switch {
	case interrupted:
		return fmt.Errorf("sweep interrupted; run the same command again to finish it: %w", context.Canceled)
	case len(failed) > 0:
		return fmt.Errorf("%d of %d runs failed", len(failed), len(plan))
	}
	return nil
}

// sweepRunReport summarizes a run of the sweep and, unless its
// report.html is newer than its run.json, writes it (the sweep's page
// links each run's report.html), in the same read of the run.
func sweepRunReport(ctx context.Context, dir string) (*analyze.Summary, error) {
	page := filepath.Join(dir, "report.html")
	pi, err := os.Stat(page)
	mi, merr := os.Stat(filepath.Join(dir, trace.ManifestFile))
	if err == nil && merr == nil && pi.ModTime().After(mi.ModTime()) {
		return load.Summary(ctx, dir)
	}
	run, err := load.Load(ctx, dir, report.TimelineKeep(64<<20))
	if err != nil {
		return nil, err
	}
	tl, err := report.BuildTimeline(ctx, run, report.TimelineOptions{Detail: 100_000})
	if err != nil {
		return nil, err
	}
	if _, err := writeFileAtomic(ctx, page, func(w io.Writer) error { return report.WriteHTML(w, run.Summary, tl, report.Options{}) }); err != nil {
		return nil, fmt.Errorf("writing %s: %w", page, err)
	}
	return run.Summary, nil
}

// recordedOtherwise says how the finished run m differs from what the
// sweep would record (on ranks ranks, the program args), "" when it does
// not: "with --epochs 1, this sweep records it with --epochs 5".
func recordedOtherwise(m *trace.Manifest, ranks int, args []string) string {
	if m.WorldSize != ranks {
		return fmt.Sprintf("on %d ranks, this sweep records it on %d", m.WorldSize, ranks)
	}
	i := slices.Index(m.Command, "--")
	if i < 0 {
		return fmt.Sprintf("by another command (%s)", strings.Join(m.Command, " "))
	}
	rec := m.Command[i+1:]
	if slices.Equal(rec, args) {
		return ""
	}
	if len(rec) == 0 || rec[0] != args[0] {
		return fmt.Sprintf("by another command (%s)", strings.Join(rec, " "))
	}
	a, b := programFlags(rec[1:]), programFlags(args[1:])
	show := func(name string, f map[string]string) string {
		v, ok := f[name]
		switch {
		case !ok:
			return "without " + name
		case v == "":
			return "with " + name
		}
		return "with " + name + " " + v
	}
	for _, name := range slices.Sorted(maps.Keys(mapsUnion(a, b))) {
		va, oka := a[name]
		vb, okb := b[name]
		if va == vb && oka == okb {
			continue
		}
		why := show(name, a) + ", this sweep records it " + show(name, b)
		if name == "--lr-base-batch" {
			why += " (the sweep sets it to its smallest global batch unless the train flags do)"
		}
		return why
	}
	// The same flags, in another order or repeated.
	return fmt.Sprintf("as %q, this sweep records it as %q", strings.Join(rec, " "), strings.Join(args, " "))
}

// programFlags reads a program's flags as name to value ("" for a flag
// without one): --name=value, or --name followed by a value that is not
// itself a flag.
func programFlags(args []string) map[string]string {
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			out[a] = "" // a positional argument
			continue
		}
		if name, v, ok := strings.Cut(a, "="); ok {
			out[name] = v
			continue
		}
		if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			out[a] = args[i+1]
			i++
			continue
		}
		out[a] = ""
	}
	return out
}

func mapsUnion(a, b map[string]string) map[string]string {
	u := maps.Clone(a)
	maps.Copy(u, b)
	return u
}

// sweepProgress shows a sweep's progress: a bar on a terminal, a line per
// run otherwise (a log, CI).
type sweepProgress struct {
	w     io.Writer
	bar   *progressbar.ProgressBar
	n, of int
	t0    time.Time
}

func newSweepProgress(w io.Writer, tty bool, of int) *sweepProgress {
	p := &sweepProgress{w: w, of: of}
	if tty && of > 0 {
		p.bar = progressbar.NewOptions(of, progressbar.OptionSetWriter(w), progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true), progressbar.OptionSetElapsedTime(true), progressbar.OptionFullWidth(),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }))
	}
	return p
}

func (p *sweepProgress) start(what string) {
	p.t0 = time.Now()
	if p.bar != nil {
		p.bar.Describe(what)
	}
}

func (p *sweepProgress) done(what string, err error) {
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

// runQuiet runs this binary with args, its output in logPath.
func runQuiet(ctx context.Context, exe string, args []string, logPath string) error {
	lf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer lf.Close()
	c := exec.Command(exe, args...)
	c.Stdout, c.Stderr = lf, lf
	if err := c.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// The run finishes what it recorded and exits; it is redone when
		// the sweep is run again.
		_ = c.Process.Signal(os.Interrupt)
		err = <-done
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("exit status %d: %s", ee.ExitCode(), lastLine(logPath))
		}
	}
	return err
}

func lastLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var last string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if t := strings.TrimSpace(sc.Text()); t != "" {
			last = t
		}
	}
	return last
}
