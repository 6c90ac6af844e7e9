package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/inject"
	"github.com/commprof/commprof/internal/iostreams"
	"github.com/commprof/commprof/internal/rankrun"
	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/interpose/pmpi"
	"github.com/commprof/commprof/launch"
	"github.com/commprof/commprof/trace"
)

type recordOptions struct {
	argv   []string
	ranks  int
	out    string
	name   string
	codec  string
	force  bool
	inject []string
	mpi    string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	tty    bool // stderr is a terminal: the ranks may show progress
}

// rankCommands are commprof's own commands that run as ranks.
var rankCommands = map[string]bool{"bench": true, "train": true}

func newRecordCmd(argv []string, ios *iostreams.IOStreams) *cobra.Command {
	o := &recordOptions{argv: argv}
	cmd := &cobra.Command{
		Annotations: map[string]string{takesProgram: "yes"},
		Use:         "record [--ranks N] [--out DIR] [--name NAME] -- COMMAND [ARGS...]",
		Short:       "Record every collective and message of a job into a run directory",
		Long: `record runs COMMAND with every rank recording its collectives, messages and
compute spans into DIR/rank-NNNNN.arrows, with DIR/run.json describing the run.

COMMAND is a commprof command that runs as ranks (bench, train), which record
starts on --ranks local processes, or a launcher (mpirun, srun, ...) whose
command line starts commprof ranks; the ranks then find the run directory in
COMMPROF_TRACE_DIR and the job's secret in COMMPROF_SECRET, which record
has Open MPI's and MPICH's mpirun pass on to every host (-x, -genvlist).

A launcher of any other MPI program (C, C++, Fortran, Python with mpi4py) is
recorded through the PMPI library: every rank loads it with LD_PRELOAD and
records each MPI call (docs/mpi.md).

A Python program (python3 train.py) is a PyTorch job: record starts it on
--ranks local processes with torchrun's environment and records every
torch.distributed call, DDP's buckets and the steps through a startup module
it puts on PYTHONPATH; under torchrun or mpirun their ranks are recorded the
same way (docs/torch.md).`,
		Example: `  commprof record --ranks 4 -- bench allreduce
  commprof record --out runs/mpi -- mpirun -np 4 commprof bench allreduce
  commprof record --out runs/mine -- mpirun -np 4 python3 train.py
  commprof record --ranks 2 -- python3 examples/torch/train_ddp.py --epochs 1`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.stdin, o.stdout, o.stderr, o.tty = ios.In, ios.Out, ios.ErrOut, ios.IsStderrTTY()
			if len(args) == 0 {
				return usagef("record needs a command after --, e.g. commprof record --ranks 4 -- bench allreduce")
			}
			if cmd.ArgsLenAtDash() != 0 {
				return usagef("put the command to record after --: commprof record [flags] -- %s", strings.Join(args, " "))
			}
			return runRecord(cmd.Context(), o, args)
		},
	}
	f := cmd.Flags()
	f.IntVarP(&o.ranks, "ranks", "n", 4, "local ranks to start, for a commprof command")
	f.StringVarP(&o.out, "out", "o", "", "run directory (default runs/NAME-YYYYMMDD-HHMMSS)")
	f.StringVar(&o.name, "name", "", "run name (default from the command, e.g. bench-allreduce)")
	f.StringVar(&o.codec, "codec", "zstd", "trace compression: zstd, lz4 or none")
	f.BoolVar(&o.force, "force", false, "replace the run already in --out (never another kind of file, nor a run being recorded); a run that failed before recording any event is replaced without it")
	f.StringVar(&o.mpi, "mpi", "", "the MPI a launched program uses, openmpi or mpich (default: from the launcher)")
	injectFlag(cmd, &o.inject)
	return cmd
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

func defaultName(args []string) string {
	// Under a launcher, commprof's own ranks are named after their
	// command (bench-allreduce), not the launcher.
	if i := ownRanksAt(args); i > 0 && !rankCommands[args[0]] {
		return defaultName(args[i:])
	}
	var parts []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			break
		}
		parts = append(parts, filepath.Base(a))
		if len(parts) == 2 {
			break
		}
	}
	return strings.Trim(unsafeName.ReplaceAllString(strings.Join(parts, "-"), "-"), "-")
}

func runRecord(ctx context.Context, o *recordOptions, args []string) error {
	codec, err := trace.ParseCodec(o.codec)
	if err != nil {
		return usageError{fmt.Errorf("--codec: %w", err)}
	}
	faults, err := faultsOf(o.inject)
	if err != nil {
		return err
	}
	if rankCommands[args[0]] {
		if err := inject.Check(faults, o.ranks); err != nil {
			return usageError{err}
		}
	}
	name := o.name
	if name == "" {
		name = defaultName(args)
		if n := mpiName(args); n != "" {
			name = n
		}
		if n := torchName(args); n != "" {
			name = n
		}
	}
	started := time.Now()
	dir := o.out
	if dir == "" {
		dir = filepath.Join("runs", fmt.Sprintf("%s-%s", name, started.Format("20060102-150405")))
	}
	rd, err := rundir.Take(dir, o.force)
	if err != nil {
		return err
	}
	defer rd.Release()
	if rd.ReplacedEmpty {
		fmt.Fprintf(o.stderr, "commprof: replacing the run in %s, which failed before recording any event\n", dir)
	}
	absDir, _ := filepath.Abs(dir)
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	runID := name + "-" + hex.EncodeToString(id)
	cmdline, _ := json.Marshal(append([]string{"commprof", "record", "--"}, args...))
	env := []string{rankrun.EnvTraceDir + "=" + absDir, rankrun.EnvRunID + "=" + runID, rankrun.EnvRunName + "=" + name,
		rankrun.EnvCodec + "=" + string(codec), rankrun.EnvCommand + "=" + string(cmdline)}
	if os.Getenv(collectives.EnvSecret) == "" {
		// The ranks a launcher starts on this host get a secret of this
		// job's own (docs/launching.md).
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		env = append(env, collectives.EnvSecret+"="+hex.EncodeToString(key))
	}
	if len(faults) > 0 {
		env = append(env, inject.Env+"="+strings.Join(inject.Strings(faults), ";"))
		for _, f := range faults {
			fmt.Fprintf(o.stderr, "commprof: injecting on purpose: %s\n", f.Describe())
		}
	}

	if torchJob(args) {
		return recordTorch(ctx, o, rd, args, env, name, runID, codec, started)
	}
	var runErr error
	var mpi *mpiRecording
	local := rankCommands[args[0]]
	if local {
		if o.ranks < 1 {
			return usagef("--ranks %d: want at least 1", o.ranks)
		}
		runErr = rankrun.Start(ctx, o.ranks, args, env, o.stdout, o.stderr, o.tty)
	} else {
		if os.Getenv(collectives.EnvJobID) == "" {
			// One id for the launcher's ranks, whatever the launcher
			// gives them (MPICH's Hydra gives none): with it, ranks all
			// on this host find rank 0 with nothing else set.
			env = append(env, collectives.EnvJobID+"="+runID)
		}
		argv, envMPI := args, []string(nil)
		if mpi, err = prepareMPI(ctx, o, args); err != nil {
			rd.Discard() // made for this run, and empty
			return err
		} else if mpi != nil {
			argv, envMPI = mpi.plan.Args, mpi.plan.Env
		} else if f, err := pmpi.DetectFlavor(ctx, args[0]); err == nil {
			// commprof's own ranks under mpirun: the variables above
			// must reach the ranks on other hosts too.
			argv, envMPI = passOn(args, f, envNames(env), os.Getenv)
		}
		c := exec.Command(argv[0], argv[1:]...)
		c.Env = append(append(os.Environ(), env...), envMPI...)
		c.Stdin, c.Stdout, c.Stderr = o.stdin, o.stdout, o.stderr
		if err := c.Start(); err != nil {
			return fmt.Errorf("starting %s: %w", args[0], err)
		}
		done := make(chan error, 1)
		go func() { done <- c.Wait() }()
		select {
		case runErr = <-done:
		case <-ctx.Done():
			_ = c.Process.Signal(os.Interrupt)
			select {
			case runErr = <-done:
			case <-time.After(10 * time.Second):
				_ = c.Process.Kill()
				runErr = <-done
			}
		}
		if runErr != nil {
			runErr = fmt.Errorf("%s: %w", args[0], runErr)
		}
	}
	interrupted := ctx.Err() != nil
	if mpi != nil {
		return mpi.finish(rd, name, runID, args, o, codec, runErr, interrupted, started)
	}
	if local && interrupted {
		// An interrupt that came after rank 0 had finished the run (as
		// the ranks were exiting) stopped nothing.
		if m, err := trace.ReadManifest(dir); err == nil && m.Status == trace.StatusComplete {
			interrupted, runErr = false, nil
		}
	}
	if merr := finishManifest(dir, name, runID, args, o, local, runErr, interrupted, started, inject.Strings(faults)); merr != nil {
		fmt.Fprintf(o.stderr, "commprof: %v\n", merr)
	}
	summarize(o.stdout, o.stderr, dir, started)
	if interrupted {
		return fmt.Errorf("recording interrupted; what was recorded is in %s: %w", dir, context.Canceled)
	}
	return runErr
}

// passOn returns the command line of an MPI launcher that passes the
// variables names on to every rank, on every host, and the variables to
// add to the launcher's own environment. Open MPI's mpirun passes only the
// variables named with -x (or in OMPI_MCA_mca_base_env_list, which it
// refuses beside -x); MPICH's and Intel MPI's (Hydra) pass all by default,
// and those of -genvlist even when told otherwise. Names only: a value on
// the command line would show the job's secret to every user of the host.
func passOn(args []string, flavor pmpi.Flavor, names []string, getenv func(string) string) (argv, env []string) {
	a := []string{args[0]}
	switch flavor {
	case pmpi.OpenMPI:
		if list := getenv("OMPI_MCA_mca_base_env_list"); list != "" {
			return args, []string{"OMPI_MCA_mca_base_env_list=" + list + ";" + strings.Join(names, ";")}
		}
		for _, n := range names {
			a = append(a, "-x", n)
		}
	case pmpi.MPICH:
		a = append(a, "-genvlist", strings.Join(names, ","))
	default:
		return args, nil
	}
	return append(a, args[1:]...), nil
}

// envNames returns the names of the variables of env (NAME=value), and
// those of the job's own that the user set (its secret, its time limits).
func envNames(env []string) []string {
	var out []string
	for _, kv := range env {
		n, _, _ := strings.Cut(kv, "=")
		out = append(out, n)
	}
	for _, n := range []string{collectives.EnvSecret, collectives.EnvJoinTimeout, collectives.EnvPeerTimeout, collectives.EnvTransport} {
		if os.Getenv(n) != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// finishManifest records what only the launcher knows: each local rank's
// exit status and whether the run was interrupted. If rank 0 never wrote a
// manifest (it died first), it writes one from what it knows.
func finishManifest(dir, name, runID string, args []string, o *recordOptions, local bool, runErr error, interrupted bool, started time.Time, injected []string) error {
	return rundir.Finish(dir, func(m *trace.Manifest) (*trace.Manifest, error) {
		return finishedManifest(m, name, runID, args, o, local, runErr, interrupted, started, injected), nil
	})
}

// finishedManifest completes m (nil if rank 0 never wrote one).
func finishedManifest(m *trace.Manifest, name, runID string, args []string, o *recordOptions, local bool, runErr error, interrupted bool, started time.Time, injected []string) *trace.Manifest {
	if m == nil {
		m = &trace.Manifest{FormatVersion: trace.FormatVersion, CommprofVersion: versionString(), RunID: runID, Name: name,
			Command: append([]string{"commprof", "record", "--"}, args...), Start: started, Status: trace.StatusFailed, Injected: injected}
		if local {
			m.WorldSize, m.Launcher = o.ranks, "commprof"
			for r := range o.ranks {
				m.Ranks = append(m.Ranks, trace.RankEntry{Rank: r, File: trace.RankFile(r)})
			}
		}
	}
	if m.End.IsZero() {
		m.End = time.Now()
	}
	var re *launch.RankError
	if local {
		for i := range m.Ranks {
			code := 0
			if errors.As(runErr, &re) && re.Rank == m.Ranks[i].Rank {
				code = re.ExitCode
				if code < 0 {
					code = 128 + int(re.Signal)
				}
			}
			if runErr == nil || code != 0 {
				m.Ranks[i].ExitStatus = &code
			}
		}
	}
	switch {
	case interrupted:
		m.Status = trace.StatusInterrupted
	case runErr != nil:
		m.Status = trace.StatusFailed
		if m.Error == "" {
			m.Error = runErr.Error()
		}
	case m.Status == trace.StatusRunning:
		m.Status = trace.StatusFailed
		m.Error = "rank 0 did not finish the manifest"
	}
	return m
}

// summarize prints what was recorded, reading the run back batch by batch
// (a long run does not fit in memory as events).
func summarize(stdout, stderr io.Writer, dir string, started time.Time) {
	rf, err := trace.OpenRun(dir)
	if err != nil {
		fmt.Fprintf(stderr, "commprof: the run in %s could not be read back: %v\n", dir, err)
		return
	}
	var bytes, n int64
	var problems []error
	for i, st := range rf.Streams {
		bytes += st.Bytes
		err := rf.ScanStream(i, []string{trace.ColKind}, func(_ trace.RankInfo, b *trace.Batch) error { n += int64(b.Len); return nil })
		var te *trace.TruncatedError
		if errors.As(err, &te) {
			err = te
		}
		if err != nil {
			problems = append(problems, fmt.Errorf("rank %d (%s): %w", st.Rank, filepath.Base(st.Path), err))
		}
	}
	status := "unknown"
	if rf.Manifest != nil {
		status = rf.Manifest.Status
	}
	perEvent := 0.0
	if n > 0 {
		perEvent = float64(bytes) / float64(n)
	}
	fmt.Fprintf(stdout, "\nrecorded %s: %d ranks, %d events, %s on disk (%.1f B/event), %s, %s\n",
		dir, len(rf.Streams), n, units.Bytes(bytes), perEvent, time.Since(started).Round(time.Millisecond), status)
	for _, p := range append(rf.Problems, problems...) {
		fmt.Fprintf(stderr, "commprof: warning: %v\n", p)
	}
	fmt.Fprintf(stdout, "next: commprof report %s\n", dir)
}
