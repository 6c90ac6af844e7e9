package driver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/commprof/commprof/inject"
	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/internal/self"
	"github.com/commprof/commprof/interpose/pmpi"
	"github.com/commprof/commprof/rankrun"
	"github.com/commprof/commprof/trace"
)

// mpiRecording records a user's MPI program, started by a launcher,
// through the PMPI library (docs/mpi.md).
type mpiRecording struct {
	plan   *pmpi.Plan
	deaths *deathLog
}

// stderr is what the launcher writes its standard error to: w, read for
// the ranks that died on the way.
func (r *mpiRecording) stderr(w io.Writer) io.Writer {
	r.deaths = newDeathLog(w)
	return r.deaths
}

// ownRanks reports whether a launcher's command line starts commprof's
// own ranks (mpirun -np 4 commprof bench ...): they record themselves.
func ownRanks(args []string) bool { return ownRanksAt(args) > 0 }

// ownRanksAt is the index of commprof's rank command (bench, train) in a
// launcher's command line, 0 if there is none.
func ownRanksAt(args []string) int {
	exe, _ := self.Path()
	for i := 1; i+1 < len(args); i++ {
		b := filepath.Base(args[i])
		if (b == "commprof" || args[i] == exe || (exe != "" && b == filepath.Base(exe))) && rankCommands[args[i+1]] {
			return i + 1
		}
	}
	return 0
}

// interpreters run the program named by their first argument.
var interpreters = regexp.MustCompile(`^(python[0-9.]*|pypy[0-9.]*|sh|bash|perl|ruby|julia|Rscript|node)$`)

// mpiName names a run of a launcher's program after the program: "mpi-"
// and the first argument after the launcher's options that is a program
// (its script's name, for an interpreter), without its extension; "" for
// commprof's own ranks or when no argument is one.
func mpiName(args []string) string {
	if len(args) < 2 || rankCommands[args[0]] || ownRanks(args) {
		return ""
	}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if strings.HasPrefix(a, "-") || !isProgram(a) {
			continue // an option, or an option's value
		}
		prog := filepath.Base(a)
		if interpreters.MatchString(prog) && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			prog = filepath.Base(args[i+1])
		}
		prog = strings.TrimSuffix(prog, filepath.Ext(prog))
		if n := rundir.SafeName(prog); n != "" {
			return "mpi-" + n
		}
		return ""
	}
	return ""
}

// isProgram reports whether a names an executable file, as a path or on
// the PATH.
func isProgram(a string) bool {
	p, err := exec.LookPath(a)
	if err != nil {
		return false
	}
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// prepareMPI plans the recording of a launcher's program through the
// PMPI library; it returns nil when the launcher starts commprof's own
// ranks.
func prepareMPI(ctx context.Context, o *RecordOptions, args []string) (*mpiRecording, error) {
	if ownRanks(args) {
		return nil, nil
	}
	var flavor pmpi.Flavor
	if o.MPI != "" {
		f, err := pmpi.ParseFlavor(o.MPI)
		if err != nil {
			return nil, UsageError{Err: fmt.Errorf("--mpi: %w", err)}
		}
		flavor = f
	}
	if _, err := rankrun.KeepBatches(); err != nil {
		return nil, UsageError{Err: err}
	}
	exe, err := self.Path()
	if err != nil {
		return nil, fmt.Errorf("%w, beside which the PMPI library lies", err)
	}
	pass := []string{envnames.TraceDir, envnames.RunID, envnames.RunName, envnames.Command, envnames.Sample, envnames.Codec}
	if len(o.Inject) > 0 {
		faults, err := FaultsOf(o.Inject)
		if err != nil {
			return nil, err
		}
		for _, f := range faults {
			if f.Kind != inject.Hang && f.Kind != inject.Mismatch && f.Kind != inject.Kill {
				return nil, Usagef("--inject %s: an MPI program recorded through the PMPI library takes hang, mismatch and kill faults only (docs/inject.md)", f)
			}
		}
		pass = append(pass, envnames.Inject)
	}
	plan, err := pmpi.Prepare(ctx, args, pmpi.PrepareOptions{Flavor: flavor, Exe: exe, Pass: pass})
	if errors.Is(err, pmpi.ErrNoFlavor) {
		return nil, UsageError{Err: err}
	}
	if err != nil {
		return nil, err
	}
	return &mpiRecording{plan: plan}, nil
}

// finish completes the run once the launcher has exited: the manifest,
// the streams compacted, the summary; and it says why when nothing was
// recorded.
func (r *mpiRecording) finish(rd *rundir.Dir, name, runID string, args []string, o *RecordOptions, codec trace.Codec, runErr error, interrupted bool, started time.Time) error {
	dir := rd.Path
	warn := func(err error) { fmt.Fprintf(o.Stderr, "commprof: warning: %v\n", err) }
	m, err := pmpi.Finish(dir, pmpi.FinishOptions{Name: name, RunID: runID,
		Command: append([]string{"commprof", "record", "--"}, args...), Flavor: r.plan.Flavor,
		CommprofVersion: o.Version, Start: started, LauncherErr: runErr, Interrupted: interrupted,
		Compact: os.Getenv(envnames.Compact) != "off", Codec: codec, Warn: warn})
	if errors.Is(err, pmpi.ErrNotRecorded) {
		rd.Discard() // only if empty: it was made for this run
		return notRecorded(context.Background(), r.plan, args, dir, runErr)
	}
	if err != nil {
		return fmt.Errorf("completing the run manifest in %s: %w", dir, err)
	}
	if r.deaths != nil {
		if err := r.deaths.record(dir); err != nil {
			warn(fmt.Errorf("adding the ranks' exit statuses to run.json: %w", err))
		}
	}
	printRecorded(o.Stdout, o.Stderr, dir, started)
	switch {
	case interrupted:
		return fmt.Errorf("recording interrupted; what was recorded is in %s: %w", dir, context.Canceled)
	case runErr != nil:
		return runErr
	case m.Status != trace.StatusComplete:
		return fmt.Errorf("the run in %s did not end well: %s", dir, m.Error)
	}
	return nil
}

// notRecorded is the error of a launcher's run in which no rank was
// recorded. When the launcher failed, that comes first, with its exit
// status: its own messages (above, on stderr) say why, and the advice
// about MPI_Init is only for ranks that did start.
func notRecorded(ctx context.Context, plan *pmpi.Plan, args []string, dir string, runErr error) error {
	var b strings.Builder
	if runErr != nil {
		fmt.Fprintf(&b, "%s failed (%s) and no rank of it was recorded; its own messages above say why.\n", args[0], exitStatus(runErr))
		if hint := rootHint(plan.Flavor, args); hint != "" {
			b.WriteString(hint + "\n")
		}
		if hint := pythonHint(ctx, args); hint != "" {
			b.WriteString(hint + "\n")
		}
		b.WriteString("If its ranks did start: ")
	} else {
		fmt.Fprintf(&b, "%s ran, but no rank of it was recorded: ", strings.Join(args, " "))
	}
	fmt.Fprintf(&b, "no rank called MPI_Init with %s loaded, so %s holds no rank-NNNNN.arrows streams. "+
		"Check that the program is an MPI program that calls MPI_Init, built against %s (ldd PROGRAM | grep -i mpi; for Python, mpi4py built against it), "+
		"and dynamically linked (LD_PRELOAD does not reach a static binary); --mpi openmpi|mpich if it uses the other MPI; "+
		"and, for ranks on other hosts, that they see %s and the library at the same paths",
		plan.Library, dir, plan.Flavor, dir)
	if plan.Flavor == pmpi.MPICH {
		b.WriteString(". MPICH's mpi_f08 module calls PMPI_Init itself: a Fortran program that uses it is not recorded (with `use mpi` or mpif.h it is)")
	}
	return errors.New(b.String())
}

// exitStatus says how a program's run ended: "exit status 1", or the
// signal that killed it.
func exitStatus(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ee.ExitCode() >= 0 {
			return fmt.Sprintf("exit status %d", ee.ExitCode())
		}
		return ee.String()
	}
	return err.Error()
}

// rootHint says what to do when Open MPI's mpirun, run as root, refused
// to start the ranks: it does unless told otherwise.
func rootHint(flavor pmpi.Flavor, args []string) string {
	if flavor != pmpi.OpenMPI || os.Geteuid() != 0 || slices.Contains(args, "--allow-run-as-root") ||
		(os.Getenv("OMPI_ALLOW_RUN_AS_ROOT") == "1" && os.Getenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM") == "1") {
		return ""
	}
	return fmt.Sprintf("This is root, and Open MPI's %s refuses to run as root unless told: add --allow-run-as-root after %s, "+
		"or set OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.", args[0], args[0])
}

// launchedProgram is the index in a launcher's command line of the
// program it starts: the first argument after the launcher's options
// that is a program; 0 if none is.
func launchedProgram(args []string) int {
	for i := 1; i < len(args); i++ {
		if !strings.HasPrefix(args[i], "-") && isProgram(args[i]) {
			return i
		}
	}
	return 0
}

// pythonHint, when the launched program is a Python interpreter that
// cannot import mpi4py, names that interpreter by its path (a pyenv shim
// or a virtual environment ahead of the system's python3 on the PATH is
// the usual cause) and one that can, if there is.
func pythonHint(ctx context.Context, args []string) string {
	i := launchedProgram(args)
	if i == 0 || !strings.HasPrefix(filepath.Base(args[i]), "python") && !strings.HasPrefix(filepath.Base(args[i]), "pypy") {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	path, err := exec.LookPath(args[i])
	if err != nil {
		return ""
	}
	path, _ = filepath.Abs(path)
	out, err := exec.CommandContext(ctx, path, "-c", "import sys, mpi4py; print(sys.executable)").CombinedOutput()
	if err == nil {
		return ""
	}
	name := path
	if real, err := exec.CommandContext(ctx, path, "-c", "import sys; print(sys.executable)").Output(); err == nil {
		if r := strings.TrimSpace(string(real)); r != "" && r != path {
			name = fmt.Sprintf("%s (which runs %s)", path, r)
		}
	}
	why := strings.TrimSpace(string(out))
	if j := strings.LastIndexByte(why, '\n'); j >= 0 {
		why = why[j+1:]
	}
	msg := fmt.Sprintf("The program's interpreter %s cannot import mpi4py (%s): install mpi4py for it (%s -m pip install mpi4py)", name, why, path)
	const system = "/usr/bin/python3"
	if path != system && exec.CommandContext(ctx, system, "-c", "import mpi4py").Run() == nil {
		msg += fmt.Sprintf(", or run %s instead, which has it", system)
	}
	return msg + "."
}
