package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/atomicfile"
	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/internal/self"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/report"
	"github.com/commprof/commprof/trace"
)

// SweepRun is one run of a sweep: its configuration and its repeat.
type SweepRun struct {
	Batch, Ranks, Rep int
	Rule, Warmup      string
}

// Dir is the run's directory under the sweep's out.
func (r SweepRun) Dir(out string) string {
	name := fmt.Sprintf("r%d-bs%d-lr%s-wu%s", r.Ranks, r.Batch, r.Rule, r.Warmup)
	if r.Rep > 0 {
		name += fmt.Sprintf("-rep%d", r.Rep+1)
	}
	return filepath.Join(out, name)
}

func (r SweepRun) String() string {
	s := fmt.Sprintf("%d ranks, batch %d, lr %s", r.Ranks, r.Batch, r.Rule)
	if r.Warmup != "0" {
		s += ", warm-up " + r.Warmup
	}
	if r.Rep > 0 {
		s += fmt.Sprintf(", repeat %d", r.Rep+1)
	}
	return s
}

// SweepPlan is every run of a sweep over the rank counts, learning-rate
// rules, warm-ups and batch sizes, repeat times each; a run without a rule
// has nothing to warm up to, so it is planned at the first warm-up only.
func SweepPlan(ranks, batches []int, rules, warmups []string, repeat int) []SweepRun {
	var plan []SweepRun
	for _, n := range ranks {
		for _, rule := range rules {
			for _, w := range warmups {
				if rule == "none" && w != warmups[0] {
					continue
				}
				for _, b := range batches {
					for rep := range repeat {
						plan = append(plan, SweepRun{Batch: b, Ranks: n, Rep: rep, Rule: rule, Warmup: w})
					}
				}
			}
		}
	}
	return plan
}

// SweepProgress is told of each run a sweep records.
type SweepProgress interface {
	Start(what string)
	Done(what string, err error)
}

// SweepOptions say what Sweep records and how it compares the runs.
type SweepOptions struct {
	Out  string
	Plan []SweepRun
	// ProgramArgs is the program a run records (after record's "--").
	ProgramArgs func(SweepRun) []string
	// Force records again finished runs recorded with other flags than
	// ProgramArgs gives; without it they are an error.
	Force bool
	// Target is the test accuracy whose time is compared (0: chosen from
	// the runs); Fit and Project the model and rank count of the
	// projection (nil: none).
	Target  float64
	Fit     *analyze.Fit
	Project int
	// Progress is told of each run recorded (nil: nothing); Log gets the
	// sweep's notes.
	Progress SweepProgress
	Log      io.Writer
	// Todo, when set, is told how many runs are to be recorded before
	// the first starts.
	Todo func(n int)
}

// SweepResult is what Sweep did.
type SweepResult struct {
	Sweep              *analyze.Sweep
	JSONPath, PagePath string
	Recorded           int      // runs recorded now
	Failed             []string // runs that failed, and why
	Interrupted        bool     // ctx ended before every run was recorded
}

// Sweep records every run of the plan not yet recorded (each with
// `commprof record --force`, its output in DIR.log), and then compares
// every finished run: DIR/sweep.json, DIR/sweep.html, and each run's
// report.html.
func Sweep(ctx context.Context, o SweepOptions) (*SweepResult, error) {
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	// A finished run is kept only when it was recorded with the command
	// this sweep would record it with: the directory's name does not hold
	// every flag.
	var todo []SweepRun
	var stale []string
	for _, r := range o.Plan {
		m, err := trace.ReadManifest(r.Dir(o.Out))
		if err != nil || m.Status != trace.StatusComplete {
			todo = append(todo, r)
			continue
		}
		if why := recordedOtherwise(m, r.Ranks, o.ProgramArgs(r)); why != "" {
			stale = append(stale, filepath.Base(r.Dir(o.Out))+" was recorded "+why)
			todo = append(todo, r)
		}
	}
	if len(stale) > 0 && !o.Force {
		more := ""
		if len(stale) > 1 {
			more = fmt.Sprintf(" (and %d more)", len(stale)-1)
		}
		return nil, fmt.Errorf("%d finished runs in %s were recorded with other flags than this sweep's: %s%s; "+
			"record this sweep under another --out, run it with the flags it was recorded with, or add --force to record those runs again (replacing them)",
			len(stale), o.Out, stale[0], more)
	}
	for _, s := range stale {
		fmt.Fprintf(o.Log, "sweep: --force: recording again: %s\n", s)
	}
	fmt.Fprintf(o.Log, "sweep: %d runs, %d already recorded in %s\n", len(o.Plan), len(o.Plan)-len(todo), o.Out)
	if o.Todo != nil {
		o.Todo(len(todo))
	}
	res := &SweepResult{}
	for _, r := range todo {
		if ctx.Err() != nil {
			break
		}
		if o.Progress != nil {
			o.Progress.Start(r.String())
		}
		args := append([]string{"record", "--force", "--ranks", fmt.Sprint(r.Ranks), "--out", r.Dir(o.Out), "--"}, o.ProgramArgs(r)...)
		err := runLogged(ctx, args, r.Dir(o.Out)+".log")
		if err != nil && ctx.Err() != nil {
			break
		}
		res.Recorded++
		if err != nil {
			res.Failed = append(res.Failed, fmt.Sprintf("%s: %v (see %s.log)", r, err, r.Dir(o.Out)))
		}
		if o.Progress != nil {
			o.Progress.Done(r.String(), err)
		}
	}
	res.Interrupted = ctx.Err() != nil
	// Compare what there is, finished or not; the pages are written even
	// after an interrupt.
	wctx := context.WithoutCancel(ctx)
	var runs []analyze.SweepRun
	for _, r := range o.Plan {
		d := r.Dir(o.Out)
		if m, err := trace.ReadManifest(d); err != nil || m.Status == trace.StatusInterrupted || m.Status == trace.StatusRunning {
			continue // not run yet, or cut short by the interrupt: redone next time
		}
		s, err := sweepRunReport(wctx, d)
		if err != nil {
			res.Failed = append(res.Failed, fmt.Sprintf("%s: %v", r, err))
			continue
		}
		runs = append(runs, analyze.SweepRun{Dir: d, Summary: s})
	}
	target := o.Target
	if target <= 0 {
		target = analyze.DefaultSweepTarget(runs)
	}
	res.Sweep = analyze.NewSweep(runs, target, o.Fit, o.Project)
	b, err := json.MarshalIndent(res.Sweep, "", " ")
	if err != nil {
		return nil, err
	}
	res.JSONPath = filepath.Join(o.Out, rundir.SweepFile)
	if _, err := atomicfile.Write(wctx, res.JSONPath, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	}); err != nil {
		return nil, err
	}
	res.PagePath = filepath.Join(o.Out, rundir.SweepPageFile)
	if _, err := atomicfile.Write(wctx, res.PagePath, func(w io.Writer) error { return report.WriteSweepHTML(w, res.Sweep) }); err != nil {
		return nil, fmt.Errorf("writing %s: %w", res.PagePath, err)
	}
	return res, nil
}

// sweepRunReport summarizes a run of the sweep and, unless its
// report.html is newer than its run.json, writes it (the sweep's page
// links each run's report.html), in the same read of the run.
func sweepRunReport(ctx context.Context, dir string) (*analyze.Summary, error) {
	page := filepath.Join(dir, rundir.ReportFile)
	pi, err := os.Stat(page)
	mi, merr := os.Stat(filepath.Join(dir, trace.ManifestFile))
	if err == nil && merr == nil && pi.ModTime().After(mi.ModTime()) {
		return load.Summary(ctx, dir)
	}
	p, err := report.LoadRunPage(ctx, dir, report.RunPageOptions{})
	if err != nil {
		return nil, err
	}
	if _, err := atomicfile.Write(ctx, page, p.Write); err != nil {
		return nil, fmt.Errorf("writing %s: %w", page, err)
	}
	return p.Summary, nil
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

// runLogged runs this binary with args, its output in logPath.
func runLogged(ctx context.Context, args []string, logPath string) error {
	lf, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer lf.Close()
	return self.Run(ctx, args, lf)
}

func splitInts(flag, s string, lo int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo {
			return nil, Usagef("--%s %q: want whole numbers of %d or more, comma-separated", flag, s, lo)
		}
		out = append(out, n)
	}
	return out, nil
}

// SweepSpec is a sweep as its flags give it: comma-separated lists of
// batch sizes per rank, learning-rate rules, warm-up epochs and rank
// counts, and the trainer's flags (or a PyTorch script's command line,
// Python) each run passes on.
type SweepSpec struct {
	Out                            string
	Batches, Rules, Warmups, Ranks string
	Repeat                         int
	Target                         float64
	Model                          string // a model file from calibrate, for the projection
	Project                        int
	Force                          bool
	TrainFlags                     []string
	Python                         []string
}

// PlanSweep checks a sweep's spec and turns it into the options Sweep
// takes, less its progress and log: the plan of runs and each run's
// program line. Errors are UsageErrors but for the model file's.
func PlanSweep(o SweepSpec) (SweepOptions, error) {
	if o.Out == "" {
		return SweepOptions{}, Usagef("--out DIR is required: the sweep's runs go under it")
	}
	batches, err := splitInts("batch-sizes", o.Batches, 1)
	if err != nil {
		return SweepOptions{}, err
	}
	ranks, err := splitInts("ranks", o.Ranks, 1)
	if err != nil {
		return SweepOptions{}, err
	}
	var rules, warmups []string
	for _, r := range strings.Split(o.Rules, ",") {
		r = strings.TrimSpace(r)
		if r != "none" && r != "linear" && r != "sqrt" {
			return SweepOptions{}, Usagef("--lr-scaling %q: want none, linear or sqrt, comma-separated", o.Rules)
		}
		rules = append(rules, r)
	}
	for _, w := range strings.Split(o.Warmups, ",") {
		w = strings.TrimSpace(w)
		if v, err := strconv.ParseFloat(w, 64); err != nil || v < 0 {
			return SweepOptions{}, Usagef("--warmup-epochs %q: want epochs of 0 or more, comma-separated", o.Warmups)
		}
		warmups = append(warmups, w)
	}
	if o.Repeat < 1 {
		return SweepOptions{}, Usagef("--repeat %d: want 1 or more", o.Repeat)
	}
	if o.Python != nil {
		if o.Rules != "none" || o.Warmups != "0" {
			return SweepOptions{}, Usagef("--lr-scaling and --warmup-epochs are the trainer's: a PyTorch script sets its own learning rate")
		}
		for _, f := range o.Python[1:] {
			if f == "--batch-size" || strings.HasPrefix(f, "--batch-size=") {
				return SweepOptions{}, Usagef("%s flag %s: the sweep passes each run's --batch-size", o.Python[0], f)
			}
		}
	}
	for _, f := range o.TrainFlags {
		for _, owned := range []string{"--batch-size", "--lr-scaling", "--warmup-epochs", "--ranks", "-n"} {
			if f == owned || strings.HasPrefix(f, owned+"=") {
				return SweepOptions{}, Usagef("train flag %s: the sweep sets it from its own flags", f)
			}
		}
	}
	// Scale the learning rate from the sweep's smallest global batch,
	// unless the train flags say otherwise.
	base := "--lr-base-batch=" + strconv.Itoa(slices.Min(batches)*slices.Min(ranks))
	for _, f := range o.TrainFlags {
		if f == "--lr-base-batch" || strings.HasPrefix(f, "--lr-base-batch=") {
			base = ""
		}
	}
	var fit *analyze.Fit
	if o.Model != "" {
		m, err := ReadModel(o.Model)
		if err != nil {
			return SweepOptions{}, err
		}
		f := m.Fit
		f.Source = o.Model
		fit = &f
	}
	// A finished run is kept only when it was recorded with the command
	// this sweep would record it with: the directory's name does not hold
	// the train flags (--epochs, --data, --lr) or the computed
	// --lr-base-batch.
	programArgs := func(r SweepRun) []string {
		if o.Python != nil {
			return append(slices.Clone(o.Python), "--batch-size", strconv.Itoa(r.Batch))
		}
		args := []string{"train", "--quiet", "--batch-size", strconv.Itoa(r.Batch), "--lr-scaling", r.Rule, "--warmup-epochs", r.Warmup}
		if base != "" {
			args = append(args, base)
		}
		return append(args, o.TrainFlags...)
	}
	return SweepOptions{Out: o.Out, Plan: SweepPlan(ranks, batches, rules, warmups, o.Repeat), ProgramArgs: programArgs, Force: o.Force,
		Target: o.Target, Fit: fit, Project: o.Project}, nil
}
