package interpose

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/commprof/commprof/collectives"
	"github.com/commprof/commprof/internal/hostslot"
	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/trace"
)

// SessionConfig describes one rank's recording.
type SessionConfig struct {
	Dir   string      // the run directory, shared by all ranks (or at least by rank 0 and this rank's host)
	Codec trace.Codec // default zstd
	// Manifest is the template rank 0 completes and writes: name, run id,
	// command, configuration, launcher, commprof version.
	Manifest trace.Manifest
	Peers    []collectives.Peer // from collectives.Join
	Recorder RecorderOptions
	// KeepBatches leaves the stream as written at the end, without
	// compacting it.
	KeepBatches bool
	// Warn hears of trouble that does not fail the run (a stream that
	// could not be compacted); nil drops it.
	Warn func(error)
	// Inner is the transport whose messages are recorded, if not the raw
	// one Start aligns clocks over: the raw one with faults injected,
	// say.
	Inner collectives.Transport
	// SampleEvery is how often the rank samples its memory, CPU time and
	// (the lowest rank of each host) the host's energy counters; 0
	// samples nothing.
	SampleEvery time.Duration
	// Powercap is where the energy counters are read (DefaultPowercap
	// when empty).
	Powercap string
}

// compactBelow is the mean batch size under which a cleanly finished
// stream is compacted: a rank writing fewer events a second than this
// wrote its batches on the flush timer. At LevelSmallest compaction
// rewrites about 300-500 k events a second, so it costs about 1% of the
// time the run took, plus the encoder's set-up (the default training run
// ended 60 ms later on 3.1 s).
const compactBelow = 4096

// compactSlots names the slots of the ranks that record into dir.
func compactSlots(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	h := sha256.Sum256([]byte(dir))
	return "commprof-compact-" + hex.EncodeToString(h[:8])
}

// Session is one rank's recording of a run.
type Session struct {
	cfg   SessionConfig
	raw   collectives.Transport
	rank  int
	file  *os.File
	rec   *Recorder
	wt    *Transport
	epoch int64
	start time.Time
	// Clock samples: rank 0 holds every rank's; the others their own.
	clocks  []clockSample
	mu      sync.Mutex
	metrics map[string]float64
	claim   *rundir.Dir // rank 0's hold on a run directory no recorder took
	sampler *Sampler
}

// SetMetric records a final figure of the run (an accuracy, a loss) for
// the manifest; only rank 0's are written.
func (s *Session) SetMetric(name string, v float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.metrics == nil {
		s.metrics = map[string]float64{}
	}
	s.metrics[name] = v
}

type clockSample struct {
	offset, rtt, at int64 // ns; at is the sample's time on the rank's trace clock
}

// clockComm is the communicator id of the clock exchanges, apart from
// every communicator a program can make (their ids are odd or 0).
const clockComm = 0xC10C0000

// Start aligns this rank's clock with rank 0's over the raw transport (all
// ranks must call it), opens the rank's stream and starts recording.
func Start(ctx context.Context, raw collectives.Transport, cfg SessionConfig) (*Session, error) {
	rank, size := raw.Rank(), raw.Size()
	s := &Session{cfg: cfg, raw: raw, rank: rank, start: time.Now()}
	if len(cfg.Peers) != size {
		return nil, fmt.Errorf("recording: %d peers for %d ranks", len(cfg.Peers), size)
	}
	epoch, clocks, err := s.alignClocks(ctx, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("recording: aligning clocks: %w", err)
	}
	s.epoch, s.clocks = epoch, clocks
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("recording: %w", err)
	}
	path := filepath.Join(cfg.Dir, trace.RankFile(rank))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("recording: %w (is the run directory reused?)", err)
	}
	mine := s.mineSample()
	host, _ := os.Hostname()
	w, err := trace.NewWriter(f, trace.RankInfo{Rank: rank, WorldSize: size, Host: host, PID: os.Getpid(),
		ClockOffsetNS: mine.offset, RunID: cfg.Manifest.RunID}, trace.WriterOptions{Codec: cfg.Codec})
	if err != nil {
		f.Close()
		return nil, err
	}
	s.file = f
	s.rec = NewRecorder(w, rank, epoch, cfg.Recorder)
	if fl, err := OpenInFlight(cfg.Dir, rank, size, host); err == nil {
		s.rec.SetInFlight(fl)
	} else if cfg.Warn != nil {
		cfg.Warn(fmt.Errorf("rank %d: %w", rank, err))
	}
	inner := raw
	if cfg.Inner != nil {
		inner = cfg.Inner
	}
	s.wt = WrapTransport(inner, s.rec)
	if cfg.SampleEvery > 0 {
		s.sampler = StartSampler(s.rec, cfg.SampleEvery, s.hostEnergy())
	}
	if rank == 0 {
		// Without a recorder (ranks a launcher started by hand), rank 0
		// holds the directory, so readers see the run alive.
		s.claim = rundir.Claim(cfg.Dir)
		if err := rundir.Begin(cfg.Dir, s.manifest(trace.StatusRunning, nil, nil, nil)); err != nil {
			s.rec.Close()
			f.Close()
			if s.claim != nil {
				s.claim.Release()
			}
			return nil, fmt.Errorf("recording: %w", err)
		}
	}
	return s, nil
}

// Transport returns the recording transport to build communicators on.
func (s *Session) Transport() *Transport { return s.wt }

// Recorder returns the rank's recorder.
func (s *Session) Recorder() *Recorder { return s.rec }

// Path returns the rank's stream.
func (s *Session) Path() string { return filepath.Join(s.cfg.Dir, trace.RankFile(s.rank)) }

// hostEnergy opens the host's energy counters on the lowest rank of its
// host, which alone records them; nil elsewhere or where there are none.
func (s *Session) hostEnergy() *RAPL {
	for r := range s.rank {
		if s.cfg.Peers[r].Host == s.cfg.Peers[s.rank].Host {
			return nil
		}
	}
	root := s.cfg.Powercap
	if root == "" {
		root = DefaultPowercap
	}
	e, err := OpenRAPL(root)
	if err != nil {
		return nil
	}
	return e
}

func (s *Session) mineSample() clockSample {
	if s.rank == 0 {
		return clockSample{}
	}
	return s.clocks[0]
}

// alignClocks runs the clock exchange: rank 0 sends its epoch, then, for
// each rank on another host, ping-pongs a few times and keeps the offset
// of the fastest round trip; every rank learns its own offset. Ranks on
// rank 0's host read the same monotonic clock: offset 0.
func (s *Session) alignClocks(ctx context.Context, round uint64, epoch int64) (int64, []clockSample, error) {
	const pings = 16
	size := s.raw.Size()
	h := collectives.Header{Comm: clockComm, Op: collectives.OpSendRecv, Algo: collectives.AlgoDirect, DType: collectives.Int64}
	msg := make([]int64, 3)
	buf := collectives.Int64s(msg).Bytes()
	tag := func(i uint64) collectives.Header { h.Seq = round<<32 | i; return h }
	sameHost := func(r int) bool { return s.cfg.Peers[r].Host == s.cfg.Peers[0].Host }
	if s.rank == 0 {
		if round == 0 {
			epoch = nanotime()
		}
		clocks := make([]clockSample, size)
		for r := 1; r < size; r++ {
			best := clockSample{rtt: math.MaxInt64}
			if sameHost(r) {
				best = clockSample{at: nanotime() - epoch}
			} else {
				for i := range uint64(pings) {
					t0 := nanotime()
					msg[0] = t0
					if err := s.raw.Send(ctx, r, tag(i), buf); err != nil {
						return 0, nil, err
					}
					if _, err := collectives.Recv(ctx, s.raw, r, tag(i), buf); err != nil {
						return 0, nil, err
					}
					t1 := nanotime()
					if rtt := t1 - t0; rtt < best.rtt {
						// The peer read its clock (msg[1]) halfway through the round trip.
						best = clockSample{offset: (t0+t1)/2 - msg[1], rtt: rtt, at: msg[1] - epoch}
					}
				}
			}
			clocks[r] = best
			msg[0], msg[1], msg[2] = epoch, best.offset, best.rtt
			if err := s.raw.Send(ctx, r, tag(pings), buf); err != nil {
				return 0, nil, err
			}
		}
		return epoch, clocks, nil
	}
	if !sameHost(s.rank) {
		for i := range uint64(pings) {
			if _, err := collectives.Recv(ctx, s.raw, 0, tag(i), buf); err != nil {
				return 0, nil, err
			}
			msg[1] = nanotime()
			if err := s.raw.Send(ctx, 0, tag(i), buf); err != nil {
				return 0, nil, err
			}
		}
	}
	if _, err := collectives.Recv(ctx, s.raw, 0, tag(pings), buf); err != nil {
		return 0, nil, err
	}
	return msg[0], []clockSample{{offset: msg[1], rtt: msg[2]}}, nil
}

// gatherEvents sends this rank's event count to rank 0, which returns
// every rank's (nil elsewhere, or when a rank did not send in time).
func (s *Session) gatherEvents(ctx context.Context, events int64) []int64 {
	h := collectives.Header{Comm: clockComm, Op: collectives.OpSendRecv, Algo: collectives.AlgoDirect, DType: collectives.Int64, Seq: 2 << 32}
	msg := []int64{events}
	buf := collectives.Int64s(msg).Bytes()
	if s.rank != 0 {
		_ = s.raw.Send(ctx, 0, h, buf)
		return nil
	}
	counts := make([]int64, s.raw.Size())
	counts[0] = events
	for r := 1; r < len(counts); r++ {
		if _, err := collectives.Recv(ctx, s.raw, r, h, buf); err != nil {
			return nil
		}
		counts[r] = msg[0]
	}
	return counts
}

// manifest builds rank 0's manifest; counts, when not nil, are the
// ranks' event counts.
func (s *Session) manifest(status string, end []clockSample, counts []int64, runErr error) *trace.Manifest {
	m := s.cfg.Manifest
	m.FormatVersion = trace.FormatVersion
	m.WorldSize = s.raw.Size()
	m.Codec = s.cfg.Codec
	if m.Codec == "" {
		m.Codec = trace.Zstd
	}
	m.Start = s.start
	m.Status = status
	if runErr != nil {
		m.Error = runErr.Error()
	}
	if status != trace.StatusRunning {
		m.End = time.Now()
	}
	s.mu.Lock()
	for k, v := range s.metrics {
		if m.Metrics == nil {
			m.Metrics = map[string]float64{}
		}
		m.Metrics[k] = v
	}
	s.mu.Unlock()
	m.Clock = trace.Clock{Method: "same-host"}
	m.Ranks = make([]trace.RankEntry, len(s.cfg.Peers))
	for r, p := range s.cfg.Peers {
		c := s.clocks[r]
		e := trace.RankEntry{Rank: r, Host: p.Host, PID: p.PID, CPUs: p.CPUs, File: trace.RankFile(r),
			ClockOffsetNS: c.offset, ClockUncertaintyNS: c.rtt / 2, SyncedAtNS: c.at}
		if c.rtt > 0 {
			m.Clock.Method = "ping-pong"
			m.Clock.UncertaintyNS = max(m.Clock.UncertaintyNS, c.rtt/2)
		}
		if end != nil && end[r].rtt > 0 && end[r].at != c.at {
			e.ClockDrift = float64(end[r].offset-c.offset) / float64(end[r].at-c.at)
		}
		if r < len(counts) {
			e.Events = counts[r]
		}
		m.Ranks[r] = e
	}
	return &m
}

// Finish ends the recording: when the run went well, every rank measures
// its clock again (so rank 0 can record the drift); the stream is flushed
// and closed; rank 0 writes the final manifest. runErr is the run's
// outcome; ctx's end marks the run interrupted.
func (s *Session) Finish(ctx context.Context, runErr error) error {
	var end []clockSample
	aligned := false
	if runErr == nil && ctx.Err() == nil {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, clocks, err := s.alignClocks(sctx, 1, s.epoch)
		cancel()
		aligned = err == nil
		if aligned && s.rank == 0 {
			end = clocks
		}
	}
	if s.sampler != nil {
		s.sampler.Stop()
	}
	// The in-flight state of a rank that failed keeps where it was.
	fl := s.rec.InFlight()
	if runErr == nil && ctx.Err() == nil {
		fl.SetState(trace.InFlightFinalizing, s.rec.Now())
	}
	err := s.rec.Close()
	var counts []int64
	if aligned && err == nil {
		// Every rank that got this far tells rank 0 what its stream
		// holds, for the manifest: nobody reads the streams to count.
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		counts = s.gatherEvents(sctx, s.rec.Events())
		cancel()
	}
	if runErr == nil && ctx.Err() == nil {
		fl.SetState(trace.InFlightFinished, s.rec.Now())
	}
	_ = fl.Close()
	if cerr := s.file.Close(); cerr != nil && err == nil {
		err = fmt.Errorf("recording: closing %s: %w", s.Path(), cerr)
	}
	// A run that ended well has its timer-flushed batches rewritten as a
	// few large ones; an interrupted or failed run keeps its streams as
	// written, and is done with quickly.
	if err == nil && runErr == nil && ctx.Err() == nil && !s.cfg.KeepBatches {
		if b := s.rec.Batches(); b > 1 && s.rec.Events()/b < compactBelow {
			// The ranks of a machine end together: as many compact at
			// once as it has cores, the others wait their turn.
			// Interrupted while it waits, it keeps its stream as written,
			// as an interrupted run does, without a word.
			release, cerr := hostslot.Acquire(ctx, compactSlots(s.cfg.Dir), runtime.NumCPU(), s.rank)
			if cerr == nil {
				_, cerr = trace.Compact(s.Path(), trace.CompactOptions{Codec: s.cfg.Codec, Level: trace.LevelSmallest})
				release()
			}
			if cerr != nil && ctx.Err() == nil && s.cfg.Warn != nil {
				s.cfg.Warn(fmt.Errorf("rank %d's stream is kept as written: %w", s.rank, cerr))
			}
		}
	}
	if s.rank == 0 {
		status := trace.StatusComplete
		switch {
		case ctx.Err() != nil || errors.Is(runErr, context.Canceled):
			status = trace.StatusInterrupted
		case runErr != nil:
			status = trace.StatusFailed
		}
		if err != nil && runErr == nil {
			// The stream could not be written (a full disk): say so.
			runErr, status = err, trace.StatusFailed
		}
		if merr := rundir.Finish(s.cfg.Dir, func(*trace.Manifest) (*trace.Manifest, error) {
			return s.manifest(status, end, counts, runErr), nil
		}); merr != nil && err == nil {
			err = fmt.Errorf("recording: %w", merr)
		}
		if s.claim != nil {
			s.claim.Release()
		}
	}
	return err
}
