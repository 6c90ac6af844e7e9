package driver

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
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/commprof/commprof/inject"
	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/interpose"
	"github.com/commprof/commprof/interpose/pmpi"
	"github.com/commprof/commprof/launch"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/rankrun"
	"github.com/commprof/commprof/trace"
)

// RecordOptions say how Record runs and records a program.
type RecordOptions struct {
	Argv    []string // commprof's own command line
	Ranks   int      // local ranks, for a commprof command
	Out     string   // the run directory ("": runs/NAME-DATE)
	Name    string   // the run's name ("": from the command)
	Codec   string
	Force   bool
	Inject  []string // --inject values
	MPI     string   // the MPI of a launched program ("": from the launcher)
	Stdin   io.Reader
	Stdout  io.Writer
	Stderr  io.Writer
	TTY     bool   // stderr is a terminal: the ranks may show progress
	Version string // commprof's version, for run.json
	Stall   StallOptions
	Sample  string // --sample: a period (100ms), a rate (10hz) or off ("": $COMMPROF_SAMPLE, or the default)
}

// RankCommands are commprof's own commands that run as ranks.
var RankCommands = map[string]bool{"bench": true, "train": true}

var rankCommands = RankCommands

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
	return rundir.SafeName(strings.Join(parts, "-"))
}

// Record runs the program args with every rank recording into a run
// directory, then completes the run's manifest and says what was
// recorded (docs/cli.md, "commprof record").
func Record(ctx context.Context, o *RecordOptions, args []string) error {
	codec, err := trace.ParseCodec(o.Codec)
	if err != nil {
		return UsageError{Err: fmt.Errorf("--codec: %w", err)}
	}
	faults, err := FaultsOf(o.Inject)
	if err != nil {
		return err
	}
	if err := o.Stall.check(); err != nil {
		return err
	}
	sample, err := sampleEnv(o.Sample)
	if err != nil {
		return err
	}
	if rankCommands[args[0]] {
		if err := inject.Check(faults, o.Ranks); err != nil {
			return UsageError{Err: err}
		}
	}
	name := o.Name
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
	dir := o.Out
	if dir == "" {
		dir = rundir.DefaultDir(name, started)
	}
	rd, err := rundir.Take(dir, o.Force)
	if err != nil {
		return err
	}
	defer rd.Release()
	if rd.ReplacedEmpty {
		fmt.Fprintf(o.Stderr, "commprof: replacing the run in %s, which failed before recording any event\n", dir)
	}
	absDir, _ := filepath.Abs(dir)
	runID := rundir.NewID(name)
	cmdline, _ := json.Marshal(append([]string{"commprof", "record", "--"}, args...))
	env := []string{envnames.TraceDir + "=" + absDir, envnames.RunID + "=" + runID, envnames.RunName + "=" + name,
		envnames.Codec + "=" + string(codec), envnames.Command + "=" + string(cmdline), envnames.Sample + "=" + sample}
	if os.Getenv(envnames.Secret) == "" {
		// The ranks a launcher starts on this host get a secret of this
		// job's own (docs/launching.md).
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		env = append(env, envnames.Secret+"="+hex.EncodeToString(key))
	}
	if len(faults) > 0 {
		env = append(env, envnames.Inject+"="+strings.Join(inject.Strings(faults), ";"))
		for _, f := range faults {
			fmt.Fprintf(o.Stderr, "commprof: injecting on purpose: %s\n", f.Describe())
		}
	}

	if torchJob(args) {
		return recordTorch(ctx, o, rd, args, env, name, runID, codec, started)
	}
	var runErr error
	var mpi *mpiRecording
	local := rankCommands[args[0]]
	// The job runs under jobCtx, which the stall watch ends on a stall
	// with --on-stall abort.
	jobCtx, stall := watchStalls(ctx, absDir, o.Stall, o.Stderr)
	if local {
		if o.Ranks < 1 {
			return Usagef("--ranks %d: want at least 1", o.Ranks)
		}
		runErr = rankrun.Start(jobCtx, o.Ranks, args, env, o.Stdout, o.Stderr, o.TTY)
	} else {
		if os.Getenv(envnames.JobID) == "" {
			// One id for the launcher's ranks, whatever the launcher
			// gives them (MPICH's Hydra gives none): with it, ranks all
			// on this host find rank 0 with nothing else set.
			env = append(env, envnames.JobID+"="+runID)
		}
		argv, envMPI := args, []string(nil)
		if mpi, err = prepareMPI(ctx, o, args); err != nil {
			_ = stall.finish()
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
		c.Stdin, c.Stdout, c.Stderr = o.Stdin, o.Stdout, o.Stderr
		if mpi != nil {
			c.Stderr = mpi.stderr(o.Stderr)
		}
		ok, err := runLauncher(jobCtx, c, args[0])
		if !ok {
			_ = stall.finish()
			return err
		}
		runErr = err
	}
	interrupted := ctx.Err() != nil
	if err := stall.finish(); err != nil && !interrupted {
		runErr = err
	}
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
		fmt.Fprintf(o.Stderr, "commprof: %v\n", merr)
	}
	printRecorded(o.Stdout, o.Stderr, dir, started)
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
	for _, n := range []string{envnames.Secret, envnames.JoinTimeout, envnames.PeerTimeout, envnames.Transport} {
		if os.Getenv(n) != "" && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// finishManifest records what only the launcher knows: each local rank's
// exit status and whether the run was interrupted. If rank 0 never wrote a
// manifest (it died first), it writes one from what it knows.
func finishManifest(dir, name, runID string, args []string, o *RecordOptions, local bool, runErr error, interrupted bool, started time.Time, injected []string) error {
	return rundir.Finish(dir, func(m *trace.Manifest) (*trace.Manifest, error) {
		return finishedManifest(m, name, runID, args, o, local, runErr, interrupted, started, injected), nil
	})
}

// finishedManifest completes m (nil if rank 0 never wrote one).
func finishedManifest(m *trace.Manifest, name, runID string, args []string, o *RecordOptions, local bool, runErr error, interrupted bool, started time.Time, injected []string) *trace.Manifest {
	if m == nil {
		m = &trace.Manifest{FormatVersion: trace.FormatVersion, CommprofVersion: o.Version, RunID: runID, Name: name,
			Command: append([]string{"commprof", "record", "--"}, args...), Start: started, Status: trace.StatusFailed, Injected: injected}
		if local {
			m.WorldSize, m.Launcher = o.Ranks, "commprof"
			for r := range o.Ranks {
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

// printRecorded prints what was recorded: the counts the writers put in
// run.json, or, where they could not, read back batch by batch.
func printRecorded(stdout, stderr io.Writer, dir string, started time.Time) {
	c, err := load.Count(context.Background(), dir)
	if err != nil {
		fmt.Fprintf(stderr, "commprof: the run in %s could not be read back: %v\n", dir, err)
		return
	}
	status := c.Status
	if status == "" {
		status = "unknown"
	}
	perEvent := 0.0
	if c.Events > 0 {
		perEvent = float64(c.DiskBytes) / float64(c.Events)
	}
	fmt.Fprintf(stdout, "\nrecorded %s: %d ranks, %d events, %s on disk (%.1f B/event), %s, %s\n",
		dir, c.Streams, c.Events, units.Bytes(c.DiskBytes), perEvent, time.Since(started).Round(time.Millisecond), status)
	for _, p := range c.Problems {
		fmt.Fprintf(stderr, "commprof: warning: %v\n", p)
	}
	fmt.Fprintf(stdout, "next: commprof report %s\n", dir)
}

// sampleEnv is the sampling period the ranks get in envnames.Sample, as
// both commprof's ranks and the PMPI library read it (ms, or off): from
// --sample, else from the environment, else the default.
func sampleEnv(flag string) (string, error) {
	v, from := flag, "--sample"
	if v == "" {
		v, from = os.Getenv(envnames.Sample), envnames.Sample
	}
	every, err := interpose.SampleEvery(v)
	if err != nil {
		return "", UsageError{Err: fmt.Errorf("%s: %w", from, err)}
	}
	if every == 0 {
		return "off", nil
	}
	return strconv.FormatFloat(float64(every)/float64(time.Millisecond), 'g', -1, 64) + "ms", nil
}

// runLauncher starts a launcher (mpirun, torchrun, ...) and waits for
// it; when ctx ends first, it stops the job (stopLauncher). started is
// false when the launcher could not be started, err then saying why;
// otherwise err is how it exited, named after it.
func runLauncher(ctx context.Context, c *exec.Cmd, name string) (started bool, err error) {
	if err := c.Start(); err != nil {
		return false, fmt.Errorf("starting %s: %w", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		err = stopLauncher(c, done)
	}
	if err != nil {
		err = fmt.Errorf("%s: %w", name, err)
	}
	return true, err
}

// stopLauncher ends a launched job that is to stop (Ctrl-C, SIGTERM,
// --on-stall abort) and returns how the launcher exited. The launcher is
// asked first (SIGINT, which mpirun passes on to its ranks); ranks that
// hang inside an MPI call never see it, so after a grace period the
// launcher and every process it started on this host get SIGTERM, then
// SIGKILL. The processes are found before each signal, while the launcher
// is still their parent: a launcher killed alone would leave its ranks
// spinning with no parent.
func stopLauncher(c *exec.Cmd, done <-chan error) error {
	pid := c.Process.Pid
	tree := map[int]bool{}
	collect := func() {
		for _, p := range descendants(pid) {
			tree[p] = true
		}
	}
	signal := func(sig syscall.Signal) {
		collect()
		for p := range tree {
			_ = syscall.Kill(p, sig)
		}
		_ = syscall.Kill(pid, sig)
	}
	collect()
	_ = c.Process.Signal(os.Interrupt)
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		signal(syscall.SIGTERM)
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			signal(syscall.SIGKILL)
			err = <-done
		}
	}
	for p := range tree { // what the launcher left behind, if still its
		if pp := parentOf(p); pp == 1 || pp == pid || tree[pp] {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	return err
}

// parentOf is the parent of process p, -1 when it is gone.
func parentOf(p int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
	if err != nil {
		return -1
	}
	st := string(b)
	j := strings.LastIndexByte(st, ')')
	if j < 0 {
		return -1
	}
	f := strings.Fields(st[j+1:])
	if len(f) < 2 {
		return -1
	}
	pp, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return pp
}

// descendants lists the processes under pid (its children, theirs, ...),
// from /proc; none where /proc cannot be read.
func descendants(pid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		st := string(b)
		j := strings.LastIndexByte(st, ')')
		if j < 0 {
			continue
		}
		f := strings.Fields(st[j+1:])
		if len(f) < 2 {
			continue
		}
		if pp, err := strconv.Atoi(f[1]); err == nil {
			children[pp] = append(children[pp], p)
		}
	}
	var out []int
	queue := []int{pid}
	seen := map[int]bool{pid: true}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, ch := range children[p] {
			if !seen[ch] {
				seen[ch] = true
				out = append(out, ch)
				queue = append(queue, ch)
			}
		}
	}
	return out
}
