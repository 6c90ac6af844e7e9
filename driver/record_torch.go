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
	"strings"
	"time"

	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/interpose/pmpi"
	"github.com/commprof/commprof/interpose/torch"
	"github.com/commprof/commprof/launch"
	"github.com/commprof/commprof/trace"
)

// torchJob reports whether record runs args as a PyTorch job
// (docs/torch.md): a Python program record starts on --ranks local
// processes, PyTorch's own launcher, or an MPI launcher of a Python
// program (which the PMPI library records too, for mpi4py programs).
func torchJob(args []string) bool {
	return torch.IsPython(args) || torch.IsTorchLauncher(args) || (torchUnderMPI(args))
}

// torchUnderMPI says whether a launcher's command line runs a PyTorch
// job: a Python script that imports torch. A Python program that does not
// (an mpi4py program) is an MPI program, recorded through the PMPI
// library with everything record does for one (the stall watch, the
// launcher's word on dead ranks).
func torchUnderMPI(args []string) bool {
	b := filepath.Base(args[0])
	if !(strings.HasPrefix(b, "mpirun") || strings.HasPrefix(b, "mpiexec") || b == "srun") || !torch.LaunchesPython(args) {
		return false
	}
	return scriptUsesTorch(args)
}

// importsTorch matches a Python line that imports torch.
var importsTorch = regexp.MustCompile(`(?m)^[ \t]*(import[ \t]+[^#\n]*\btorch\b|from[ \t]+torch\b)`)

// scriptUsesTorch reports whether the Python script a command line runs
// imports torch. A script it cannot read (python -m, -c, a missing file)
// counts as one that does: its ranks are recorded as a PyTorch job's, and
// as an MPI program's if they call MPI_Init.
func scriptUsesTorch(args []string) bool {
	for i, a := range args {
		if !torch.IsPython([]string{a}) {
			continue
		}
		rest := args[i+1:]
		for j := 0; j < len(rest); j++ {
			s := rest[j]
			switch {
			case s == "-m" || s == "-c" || strings.HasPrefix(s, "-c") || strings.HasPrefix(s, "-m"):
				return true // a module or a command line: not read
			case s == "-W" || s == "-X":
				j++ // an option with its value
				continue
			case strings.HasPrefix(s, "-"):
				continue // -u, -O, -B, ...
			}
			f, err := os.Open(s)
			if err != nil {
				return true
			}
			b, _ := io.ReadAll(io.LimitReader(f, 4<<20))
			f.Close()
			return importsTorch.Match(b)
		}
		return true
	}
	return true
}

// torchName names a Python job's run after its script: torch-train.
func torchName(args []string) string {
	if !torchJob(args) || torchUnderMPI(args) {
		return ""
	}
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "-m" && i+1 < len(args) && !torch.IsTorchLauncher(args) {
			return "torch-" + rundir.SafeName(args[i+1])
		}
		if strings.HasSuffix(a, ".py") {
			n := strings.TrimSuffix(filepath.Base(a), ".py")
			return "torch-" + rundir.SafeName(n)
		}
	}
	return "torch"
}

// recordTorch runs a PyTorch job with commprof's recorder on its Python
// path and turns what its ranks spooled into the run.
func recordTorch(ctx context.Context, o *RecordOptions, rd *rundir.Dir, args, env []string, name, runID string, codec trace.Codec, started time.Time) error {
	dir := rd.Path
	asTyped := args
	pydir, err := torch.Startup("")
	if err != nil {
		return err
	}
	defer os.RemoveAll(pydir)
	local := torch.IsPython(args) && !torch.IsTorchLauncher(args)
	tenv, err := torch.Env(pydir, local || torchUnderMPI(args), os.Getenv)
	if err != nil {
		return err
	}
	env = append(env, tenv...)
	launcher := "commprof"
	if torch.IsPython(args) {
		args = pythonWithTorch(ctx, args, o)
	}
	var runErr, pmpiErr error
	var mpi *mpiRecording
	switch {
	case local:
		if o.Ranks < 1 {
			rd.Discard()
			return Usagef("--ranks %d: want at least 1", o.Ranks)
		}
		path, err := exec.LookPath(args[0])
		if err != nil {
			rd.Discard()
			return fmt.Errorf("finding %s: %w", args[0], err)
		}
		runErr = launch.Run(ctx, launch.Spec{Ranks: o.Ranks, Path: path, Args: args[1:], Env: env, Stdout: o.Stdout, Stderr: o.Stderr})
	default:
		launcher = "torchrun"
		argv, extra := args, []string(nil)
		if torchUnderMPI(args) {
			launcher = "mpi"
			// Ranks on other hosts reach rank 0's rendezvous by this
			// host's name, where rank 0 runs unless the hostfile says
			// otherwise (then MASTER_ADDR is the user's to set).
			if host, err := os.Hostname(); err == nil {
				env = append(env, torch.EnvMasterAddr+"="+host)
			}
			// An mpi4py program among them is recorded by the PMPI
			// library (srun belongs to no MPI: there is none to choose).
			// Without the library (commprof installed without it), the
			// torch job is recorded all the same.
			if filepath.Base(args[0]) != "srun" {
				if mpi, pmpiErr = prepareMPI(ctx, o, args); pmpiErr != nil {
					mpi = nil
				} else if mpi != nil {
					argv, extra = mpi.plan.Args, mpi.plan.Env
				}
			}
			if f, err := pmpi.DetectFlavor(ctx, args[0]); err == nil {
				argv, _ = passOn(argv, f, append(envNames(env), "PYTHONPATH"), os.Getenv)
			}
		}
		c := exec.Command(argv[0], argv[1:]...)
		c.Env = append(append(os.Environ(), env...), extra...)
		c.Stdin, c.Stdout, c.Stderr = o.Stdin, o.Stdout, o.Stderr
		ok, err := runLauncher(ctx, c, args[0])
		if !ok {
			rd.Discard()
			return err
		}
		runErr = err
	}
	interrupted := ctx.Err() != nil
	if mpi != nil && len(torch.Spools(dir)) == 0 {
		return mpi.finish(rd, name, runID, args, o, codec, runErr, interrupted, started)
	}
	warn := func(err error) { fmt.Fprintf(o.Stderr, "commprof: warning: %v\n", err) }
	m, err := torch.Finish(dir, torch.FinishOptions{Name: name, RunID: runID, Command: append([]string{"commprof", "record", "--"}, asTyped...),
		Launcher: launcher, CommprofVersion: o.Version, Start: started, LauncherErr: runErr, Interrupted: interrupted,
		Codec: codec, Warn: warn, Args: args})
	if errors.Is(err, torch.ErrNotRecorded) {
		rd.Discard()
		why := fmt.Sprintf("%s: no rank called torch.distributed.init_process_group with commprof's recorder loaded, so nothing was recorded", strings.Join(args, " "))
		if runErr != nil {
			why = fmt.Sprintf("%s failed (%s) before any rank was recorded; its own messages above say why", args[0], exitStatus(runErr))
			if torch.IsTorchLauncher(args) {
				why += ". If the launcher itself failed (torchrun of PyTorch 1.13 does on Python 3.11), " +
					"commprof record --ranks N -- python3 SCRIPT [ARGS] starts the same ranks with torchrun's environment"
			}
		}
		if pmpiErr != nil {
			why += fmt.Sprintf(" (nor could an mpi4py program be: %v)", pmpiErr)
		}
		return fmt.Errorf("%s. commprof records PyTorch jobs through a startup module it puts first on PYTHONPATH: "+
			"check that the program imports torch.distributed and calls init_process_group, and that the interpreter is the one with torch (%s)", why, pythonOf(args))
	}
	if err != nil {
		return fmt.Errorf("completing the run in %s: %w", dir, err)
	}
	printRecorded(o.Stdout, o.Stderr, dir, started)
	switch {
	case interrupted:
		return fmt.Errorf("recording interrupted; what was recorded is in %s: %w", dir, context.Canceled)
	case runErr != nil:
		var re *launch.RankError
		if errors.As(runErr, &re) {
			return fmt.Errorf("%w (what was recorded is in %s)", runErr, dir)
		}
		return runErr
	case m.Status != trace.StatusComplete:
		return fmt.Errorf("the run in %s did not end well: %s", dir, m.Error)
	}
	return nil
}

// pythonOf names the interpreter of a Python job.
func pythonOf(args []string) string {
	for _, a := range args {
		if torch.IsPython([]string{a}) {
			if p, err := exec.LookPath(a); err == nil {
				return p
			}
			return a
		}
	}
	return args[0]
}

// systemPython is the Debian interpreter, which python3-torch installs into.
const systemPython = "/usr/bin/python3"

// pythonWithTorch returns args with an interpreter that can import torch:
// when the python3 on the PATH (a pyenv shim, a virtual environment)
// cannot and the system's can, the system's, saying so.
func pythonWithTorch(ctx context.Context, args []string, o *RecordOptions) []string {
	if strings.Contains(args[0], "/") {
		return args // the user named one
	}
	has := func(py string) bool {
		ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		return exec.CommandContext(ctx, py, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)").Run() == nil
	}
	path, err := exec.LookPath(args[0])
	if err != nil || has(path) || path == systemPython || !has(systemPython) {
		return args
	}
	fmt.Fprintf(o.Stderr, "commprof: %s (%s) cannot import torch; running the job with %s, which can\n", args[0], path, systemPython)
	return append([]string{systemPython}, args[1:]...)
}
