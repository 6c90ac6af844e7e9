package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/inject"
	"github.com/commprof/commprof/interpose"
	"github.com/commprof/commprof/launch"
	"github.com/commprof/commprof/trace"
)

// Variables `commprof record` hands the ranks (directly, or through a
// launcher such as mpirun) so that they record.
const (
	envTraceDir = "COMMPROF_TRACE_DIR"
	envRunID    = "COMMPROF_RUN_ID"
	envRunName  = "COMMPROF_RUN_NAME"
	envCodec    = "COMMPROF_CODEC"
	envCommand  = "COMMPROF_COMMAND" // the recorded command line, as a JSON array
	envFlush    = "COMMPROF_FLUSH"   // longest time an event waits before it is written (default 1s)
	envCompact  = "COMMPROF_COMPACT" // on (default) or off: rewrite timer-flushed streams as large batches at a clean end
)

// thisRank reports whether this process is a rank of a job, started by a
// launcher (commprof's own or an external one), and if so which. If not,
// the command should start ranks local ranks of itself; ranksSet says
// whether --ranks was given, which a launcher's rank count must then match.
func thisRank(ranks int, ranksSet bool) (collectives.Job, bool, error) {
	job, inJob, err := collectives.JobFromEnv(os.Getenv)
	switch {
	case err != nil:
		return job, false, err
	case !inJob && ranks < 1:
		return job, false, usagef("--ranks %d: want at least 1", ranks)
	case inJob && ranksSet && ranks != job.Size:
		return job, false, usagef("--ranks %d, but %s started %d ranks", ranks, job.Launcher, job.Size)
	}
	return job, inJob, nil
}

// startRanks runs this same command line on n local ranks.
func startRanks(ctx context.Context, n int, argv []string, env []string, stdout, stderr io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding the commprof binary to start ranks: %w", err)
	}
	return launch.Run(ctx, launch.Spec{Ranks: n, Path: exe, Args: argv, Env: env, Stdout: stdout, Stderr: stderr})
}

// rankTools is what a rank's program gets besides its communicator.
type rankTools struct {
	// Rec records the program's own spans; nil when the run is not recorded.
	Rec *interpose.Recorder
	// SetMetric puts a final figure in the run's manifest (when recorded).
	SetMetric func(name string, v float64)
}

// rankMain joins the job, runs f on the world communicator (recording it
// when COMMPROF_TRACE_DIR is set), and on failure aborts the job so every
// other rank stops with this rank's reason. config describes the run for
// the manifest.
func rankMain(ctx context.Context, job collectives.Job, cfg collectives.Config, config map[string]string, faults []inject.Fault, f func(context.Context, collectives.Communicator, rankTools) error) error {
	if prefix := os.Getenv("COMMPROF_CPUPROFILE"); prefix != "" {
		pf, err := os.Create(fmt.Sprintf("%s.rank%d", prefix, job.Rank))
		if err != nil {
			return fmt.Errorf("COMMPROF_CPUPROFILE: %w", err)
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("COMMPROF_CPUPROFILE: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	// Ranks sharing a host share its cores: a Go runtime per rank with
	// every core would have idle threads wake and fight for them, which
	// costs latency. MPI ranks are one thread each for the same reason.
	if os.Getenv("GOMAXPROCS") == "" && job.LocalSize > 0 {
		runtime.GOMAXPROCS(max(1, runtime.NumCPU()/job.LocalSize))
	}
	if err := inject.Check(faults, job.Size); err != nil {
		return usageError{err}
	}
	plan := inject.ForRank(faults, job.Rank)
	tr, peers, err := collectives.Join(ctx, job.JoinConfig)
	if err != nil {
		return err
	}
	defer tr.Close()
	fail := func(err error) error {
		if ctx.Err() != nil {
			err = fmt.Errorf("rank %d interrupted: %w", job.Rank, ctx.Err())
		}
		tr.Abort(err)
		if !strings.HasPrefix(err.Error(), "rank ") {
			err = fmt.Errorf("rank %d: %w", job.Rank, err)
		}
		return err
	}

	if !plan.Empty() {
		exe, err := os.Executable()
		if err != nil {
			return fail(fmt.Errorf("injecting faults: finding the commprof binary: %w", err))
		}
		stopHelpers, err := plan.Start(exe)
		if err != nil {
			return fail(err)
		}
		defer stopHelpers()
	}
	var transport = plan.WrapTransport(tr)
	var session *interpose.Session
	if dir := os.Getenv(envTraceDir); dir != "" {
		codec, err := trace.ParseCodec(os.Getenv(envCodec))
		if err != nil {
			return fail(fmt.Errorf("%s: %w", envCodec, err))
		}
		m := trace.Manifest{CommprofVersion: versionString(), RunID: os.Getenv(envRunID), Name: os.Getenv(envRunName),
			Launcher: job.Launcher, Config: config, Command: os.Args, Injected: faultStrings(faults)}
		if js := os.Getenv(envCommand); js != "" {
			_ = json.Unmarshal([]byte(js), &m.Command)
		}
		if m.Name == "" {
			m.Name = filepath.Base(dir)
		}
		var ropt interpose.RecorderOptions
		if v := os.Getenv(envFlush); v != "" {
			if ropt.FlushEvery, err = time.ParseDuration(v); err != nil || ropt.FlushEvery <= 0 {
				return fail(fmt.Errorf("%s=%q: want a duration such as 1s", envFlush, v))
			}
		}
		var keep bool
		switch v := os.Getenv(envCompact); v {
		case "", "on":
		case "off":
			keep = true
		default:
			return fail(fmt.Errorf("%s=%q: want on or off", envCompact, v))
		}
		warn := func(err error) { fmt.Fprintf(os.Stderr, "commprof: warning: %v\n", err) }
		session, err = interpose.Start(ctx, tr, interpose.SessionConfig{Dir: dir, Codec: codec, Manifest: m, Peers: peers,
			Recorder: ropt, KeepBatches: keep, Warn: warn, Inner: transport})
		if err != nil {
			return fail(err)
		}
		transport = session.Transport()
		cfg.Trace = session.Transport().CollectiveTrace()
	}
	comm, err := collectives.New(transport, cfg)
	if err != nil {
		return fail(err)
	}
	var c collectives.Communicator = comm
	tools := rankTools{SetMetric: func(string, float64) {}}
	var mark func(string, float64)
	if session != nil {
		c = interpose.WrapComm(comm, session.Recorder(), session.Transport())
		tools = rankTools{Rec: session.Recorder(), SetMetric: session.SetMetric}
		mark = session.Recorder().Mark
	}
	// Delays sit above the recording, so a delayed rank is recorded
	// arriving late, as a slow rank would.
	c = plan.WrapComm(c, mark)
	// Every rank is connected to every other once this returns.
	err = c.Barrier(ctx)
	if err == nil {
		err = f(ctx, c, tools)
	}
	if session != nil {
		if ferr := session.Finish(ctx, err); ferr != nil && err == nil {
			err = ferr
		}
	}
	if err != nil {
		return fail(err)
	}
	return nil
}

func faultStrings(faults []inject.Fault) []string {
	var out []string
	for _, f := range faults {
		out = append(out, f.String())
	}
	return out
}

// injectFlag adds --inject to a command's flags.
func injectFlag(cmd *cobra.Command, specs *[]string) {
	cmd.Flags().StringArrayVar(specs, "inject", nil,
		"inject a fault, e.g. delay:rank=2,dur=20ms,every=1 (repeatable; docs/inject.md)")
}

// faultsOf parses --inject values and COMMPROF_INJECT.
func faultsOf(specs []string) ([]inject.Fault, error) {
	var out []inject.Fault
	for _, s := range append([]string{os.Getenv(inject.Env)}, specs...) {
		fs, err := inject.Parse(s)
		if err != nil {
			if s == os.Getenv(inject.Env) {
				return nil, usagef("%s: %v", inject.Env, err)
			}
			return nil, usagef("--inject: %v", err)
		}
		out = append(out, fs...)
	}
	return out, nil
}
