// Package rankrun is what every rank of a commprof program (bench, train)
// runs around the program itself: it finds out whether this process is a
// rank and which, starts the local ranks when it is not, joins the job,
// records it when `commprof record` asked for it (the environment
// protocol below), injects the faults asked for, and on failure aborts the
// job so every other rank stops with this rank's reason.
//
// The command's main parses its flags and calls Here, then Start or Run.
package rankrun

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/inject"
	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/internal/self"
	"github.com/commprof/commprof/interpose"
	"github.com/commprof/commprof/launch"
	"github.com/commprof/commprof/trace"
)

// RanksError is Here's error when the rank count asked for is wrong: a
// usage error.
type RanksError string

func (e RanksError) Error() string { return string(e) }

// Here reports whether this process is a rank of a job, started by a
// launcher (commprof's own or an external one), and if so which. If not,
// the command should Start ranks local ranks of itself; ranksSet says
// whether the rank count was given, which a launcher's count must then
// match.
func Here(ranks int, ranksSet bool) (collectives.Job, bool, error) {
	job, inJob, err := collectives.JobFromEnv(os.Getenv)
	switch {
	case err != nil:
		return job, false, err
	case !inJob && ranks < 1:
		return job, false, RanksError(fmt.Sprintf("--ranks %d: want at least 1", ranks))
	case inJob && ranksSet && ranks != job.Size:
		return job, false, RanksError(fmt.Sprintf("--ranks %d, but %s started %d ranks", ranks, job.Launcher, job.Size))
	}
	return job, inJob, nil
}

// Start runs this same program with args on n local ranks, their output
// forwarded to stdout and stderr, env added to their environment.
func Start(ctx context.Context, n int, args []string, env []string, stdout, stderr io.Writer, stderrTTY bool) error {
	exe, err := self.Path()
	if err != nil {
		return fmt.Errorf("starting ranks: %w", err)
	}
	progress := "0"
	if stderrTTY {
		progress = "1"
	}
	env = append(slices.Clip(env), envnames.Progress+"="+progress)
	return launch.Run(ctx, launch.Spec{Ranks: n, Path: exe, Args: args, Env: env, Stdout: stdout, Stderr: stderr})
}

// Progress reports whether this process may show progress bars: as the
// commprof that started it as a rank says (envnames.Progress), else whether its
// own stderr is a terminal.
func Progress(stderrTTY bool) bool {
	if v, ok := os.LookupEnv(envnames.Progress); ok {
		return v == "1"
	}
	return stderrTTY
}

// Tools is what a rank's program gets besides its communicator.
type Tools struct {
	// Rec records the program's own spans; nil when the run is not recorded.
	Rec *interpose.Recorder
	// SetMetric puts a final figure in the run's manifest (when recorded).
	SetMetric func(name string, v float64)
	// Links says how this rank reaches its peers (collectives.Mesh's
	// Describe), for benchmark headers.
	Links string
}

// Spec is one rank's job.
type Spec struct {
	Job         collectives.Job
	Collectives collectives.Config
	// Config describes the run's configuration for the manifest.
	Config map[string]string
	// Faults are the faults to inject, every rank's: each rank takes its own.
	Faults []inject.Fault
	// Version is commprof's, for the manifest.
	Version string
	// Warn prints a warning that does not stop the rank.
	Warn func(error)
}

// Run joins the job, runs program on the world communicator (recording
// it when envnames.TraceDir is set), and on failure aborts the job so every
// other rank stops with this rank's reason.
func Run(ctx context.Context, s Spec, program func(context.Context, collectives.Communicator, Tools) error) error {
	job, cfg := s.Job, s.Collectives
	if prefix := os.Getenv(envnames.CPUProfile); prefix != "" {
		pf, err := os.Create(fmt.Sprintf("%s.rank%d", prefix, job.Rank))
		if err != nil {
			return fmt.Errorf("%s: %w", envnames.CPUProfile, err)
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("%s: %w", envnames.CPUProfile, err)
		}
		defer pprof.StopCPUProfile()
	}
	// Ranks sharing a host share its cores: a Go runtime per rank with
	// every core would have idle threads wake and fight for them, which
	// costs latency. MPI ranks are one thread each for the same reason.
	if os.Getenv("GOMAXPROCS") == "" && job.LocalSize > 0 {
		runtime.GOMAXPROCS(max(1, runtime.NumCPU()/job.LocalSize))
	}
	if err := inject.Check(s.Faults, job.Size); err != nil {
		return err
	}
	plan := inject.ForRank(s.Faults, job.Rank)
	tr, peers, err := collectives.Join(ctx, job.JoinConfig)
	if err != nil {
		return err
	}
	defer tr.Close()
	if err := tr.ShmFallback(); err != nil {
		warn := s.Warn
		if warn == nil {
			warn = func(err error) { fmt.Fprintf(os.Stderr, "commprof: warning: %v\n", err) }
		}
		warn(fmt.Errorf("rank %d: %w", job.Rank, err))
	}
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

	// The recorder once there is one, for the stall helpers' reports.
	var stallRec atomic.Pointer[interpose.Recorder]
	if !plan.Empty() {
		exe, err := self.Path()
		if err != nil {
			return fail(fmt.Errorf("injecting faults: %w", err))
		}
		stopHelpers, err := plan.Start(exe, func(from, to int64) {
			if rec := stallRec.Load(); rec != nil {
				rec.RecordAt(inject.MarkStall, from, float64(to-from))
			}
		})
		if err != nil {
			return fail(err)
		}
		defer stopHelpers()
	}
	transport := plan.WrapTransport(tr)
	var session *interpose.Session
	if dir := os.Getenv(envnames.TraceDir); dir != "" {
		if session, err = startSession(ctx, s, dir, tr, transport, peers); err != nil {
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
	tools := Tools{SetMetric: func(string, float64) {}, Links: tr.Describe()}
	var mark func(string, float64)
	if session != nil {
		c = interpose.WrapComm(comm, session.Recorder(), session.Transport())
		tools = Tools{Rec: session.Recorder(), SetMetric: session.SetMetric, Links: tools.Links}
		mark = session.Recorder().Mark
		stallRec.Store(session.Recorder())
	}
	// Delays sit above the recording, so a delayed rank is recorded
	// arriving late, as a slow rank would.
	c = plan.WrapComm(c, mark)
	// Every rank is connected to every other once this returns.
	err = c.Barrier(ctx)
	if err == nil {
		err = program(ctx, c, tools)
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

// startSession starts recording this rank into dir, as the environment
// record set says.
func startSession(ctx context.Context, s Spec, dir string, tr collectives.Transport, inner collectives.Transport, peers []collectives.Peer) (*interpose.Session, error) {
	codec, err := trace.ParseCodec(os.Getenv(envnames.Codec))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envnames.Codec, err)
	}
	m := trace.Manifest{CommprofVersion: s.Version, RunID: os.Getenv(envnames.RunID), Name: os.Getenv(envnames.RunName),
		Launcher: s.Job.Launcher, Config: s.Config, Command: os.Args, Injected: inject.Strings(s.Faults)}
	if js := os.Getenv(envnames.Command); js != "" {
		_ = json.Unmarshal([]byte(js), &m.Command)
	}
	if m.Name == "" {
		m.Name = filepath.Base(dir)
	}
	var ropt interpose.RecorderOptions
	if v := os.Getenv(envnames.Flush); v != "" {
		if ropt.FlushEvery, err = time.ParseDuration(v); err != nil || ropt.FlushEvery <= 0 {
			return nil, fmt.Errorf("%s=%q: want a duration such as 1s", envnames.Flush, v)
		}
	}
	keep, err := KeepBatches()
	if err != nil {
		return nil, err
	}
	warn := s.Warn
	if warn == nil {
		warn = func(err error) { fmt.Fprintf(os.Stderr, "commprof: warning: %v\n", err) }
	}
	return interpose.Start(ctx, tr, interpose.SessionConfig{Dir: dir, Codec: codec, Manifest: m, Peers: peers,
		Recorder: ropt, KeepBatches: keep, Warn: warn, Inner: inner})
}

// KeepBatches reads envnames.Compact: whether a recording keeps its streams as
// written (off) rather than rewriting them as large batches at a clean
// end (on, the default).
func KeepBatches() (bool, error) {
	switch v := os.Getenv(envnames.Compact); v {
	case "", "on":
		return false, nil
	case "off":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: want on or off", envnames.Compact, v)
	}
}
