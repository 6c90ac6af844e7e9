package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"time"
)

// ManifestFile is the name of a run's manifest in its directory.
const ManifestFile = "run.json"

// RankFile returns the name of rank r's stream in a run directory.
func RankFile(r int) string { return fmt.Sprintf("rank-%05d.arrows", r) }

var rankFileRE = regexp.MustCompile(`^rank-(\d{5,})\.arrows$`)

// Run statuses in the manifest.
const (
	StatusRunning     = "running"
	StatusComplete    = "complete"
	StatusFailed      = "failed"
	StatusInterrupted = "interrupted"
	// StatusAbandoned is never written: readers show it for a run whose
	// run.json says running when no process records it any more (its
	// recorder was killed).
	StatusAbandoned = "abandoned"
)

// Metrics are a run's final figures. A figure that is not a number (a loss
// that went NaN, an infinite one) is kept: JSON has no NaN, so it is
// written as null and read back as NaN.
type Metrics map[string]float64

// MarshalJSON implements json.Marshaler.
func (m Metrics) MarshalJSON() ([]byte, error) {
	if m == nil {
		return []byte("null"), nil
	}
	out := make(map[string]*float64, len(m))
	for k, v := range m {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			out[k] = nil
			continue
		}
		out[k] = &v
	}
	return json.Marshal(out)
}

// Number is a float64 that JSON carries even when it is not a number:
// NaN and infinities are written as null, and null reads as NaN.
type Number float64

// MarshalJSON implements json.Marshaler.
func (n Number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return json.Marshal(f)
}

// UnmarshalJSON implements json.Unmarshaler.
func (n *Number) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*n = Number(math.NaN())
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Number(f)
	return nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (m *Metrics) UnmarshalJSON(b []byte) error {
	var in map[string]*float64
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	if in == nil {
		*m = nil
		return nil
	}
	*m = make(Metrics, len(in))
	for k, v := range in {
		if v == nil {
			(*m)[k] = math.NaN()
		} else {
			(*m)[k] = *v
		}
	}
	return nil
}

// Manifest describes a run; it is run.json beside the rank streams.
type Manifest struct {
	FormatVersion   int               `json:"format_version"`
	CommprofVersion string            `json:"commprof_version"`
	RunID           string            `json:"run_id"`
	Name            string            `json:"name"`
	WorldSize       int               `json:"world_size"`
	Launcher        string            `json:"launcher"`
	Command         []string          `json:"command"`
	Config          map[string]string `json:"config,omitempty"`
	Metrics         Metrics           `json:"metrics,omitempty"`
	Codec           Codec             `json:"codec"`
	Start           time.Time         `json:"start"`
	End             time.Time         `json:"end,omitzero"`
	Status          string            `json:"status"`
	Error           string            `json:"error,omitempty"`
	Clock           Clock             `json:"clock"`
	Ranks           []RankEntry       `json:"ranks"`
	// Source says where the events came from when commprof's own
	// collective layer did not record them; nil for commprof's ranks.
	Source *Source `json:"source,omitempty"`
	// Injected lists the faults injected into the run on purpose
	// (COMMPROF_INJECT, --inject), so that a report can say so.
	Injected []string `json:"injected,omitempty"`
}

// Source describes events that commprof's collective layer did not record
// itself: a user's MPI program recorded through the PMPI library, or a
// trace imported from another tool.
type Source struct {
	// Format names the source: "pmpi", "pytorch", "horovod", "kineto", "nccl-log",
	// "nccl-inspector", "nccl-tests".
	Format string `json:"format"`
	// Tool is what produced the events: the MPI library, the importer's
	// input tool and version, as far as known.
	Tool string `json:"tool,omitempty"`
	// Files are the input files of an import.
	Files []string `json:"files,omitempty"`
	// CollectiveMessages is true when the send and recv events inside
	// collectives were recorded; a PMPI or imported run sees only the
	// calls, and a report must say so rather than show zeros.
	CollectiveMessages bool `json:"collective_messages"`
	// ToolPhases is true when the compute spans are the tool's own phases
	// (a Horovod timeline's negotiation and fusion-buffer copies), not
	// the program's work: compute, overlap and exposed communication are
	// then unknown.
	ToolPhases bool `json:"tool_phases,omitempty"`
	// Untimed is true when the events carry no measured times, only their
	// order (an NCCL debug log without timestamps: each call is placed at
	// its opCount); NoDurations when their starts are measured but not
	// their durations (a timestamped NCCL log). Analyses then leave the
	// figures measured from those times unknown.
	Untimed     bool `json:"untimed,omitempty"`
	NoDurations bool `json:"no_durations,omitempty"`
	// PartialRanks is true when some ranks hold only part of the calls
	// (a Horovod timeline: rank 0 holds every collective, the others only
	// those whose negotiation names them): per-rank figures then cover the
	// calls several ranks hold, and the run's communication fraction is
	// unknown.
	PartialRanks bool `json:"partial_ranks,omitempty"`
	// Missing lists what the source could not recover, in words for a
	// report ("message sizes: the timeline holds none").
	Missing []string `json:"missing,omitempty"`
	// Skipped counts input records that were damaged or not understood,
	// by reason.
	Skipped map[string]int64 `json:"skipped,omitempty"`
}

// Clock describes how the ranks' clocks were aligned.
type Clock struct {
	// Method: "same-host" when every rank reads one monotonic clock, else
	// "ping-pong" (rank 0 measured each other host's offset).
	Method string `json:"method"`
	// UncertaintyNS bounds the error of any rank's offset (half the best
	// round trip of its measurement).
	UncertaintyNS int64 `json:"uncertainty_ns"`
}

// RankEntry is one rank in the manifest.
type RankEntry struct {
	Rank int    `json:"rank"`
	Host string `json:"host"`
	PID  int    `json:"pid"`
	File string `json:"file"`
	// ClockOffsetNS is added to this rank's times to put them on rank 0's
	// clock, as measured at SyncedAtNS (this rank's trace time) ...
	ClockOffsetNS      int64 `json:"clock_offset_ns"`
	ClockUncertaintyNS int64 `json:"clock_uncertainty_ns"`
	SyncedAtNS         int64 `json:"synced_at_ns"`
	// ... and ClockDrift is how much the offset grows per ns after it,
	// from a second measurement at the end of the run (0 if none).
	ClockDrift float64 `json:"clock_drift"`
	// CPUs is the number of cores the rank's host let it use (0 if not
	// known): with the ranks on the host, how contended its cores were.
	CPUs int `json:"cpus,omitempty"`
	// ExitStatus is the rank's exit status when its launcher knew it.
	ExitStatus *int `json:"exit_status,omitempty"`
	// Events is how many events the rank's stream holds, as its writer
	// counted them when it closed it; 0 where the writer did not say (a
	// rank that did not finish, an older run): read the stream to count.
	Events int64 `json:"events,omitempty"`
}

// WriteManifest writes m to dir/run.json atomically. Recorders do not call
// it: internal/rundir, the one writer of run.json, does, under its lock.
func WriteManifest(dir string, m *Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the run manifest: %w", err)
	}
	tmp := filepath.Join(dir, ManifestFile+".tmp"+strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		os.Remove(tmp) // a full disk leaves it half written
		return fmt.Errorf("writing the run manifest: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, ManifestFile)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing the run manifest: %w", err)
	}
	return nil
}

// ReadManifest reads dir/run.json.
func ReadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	f, st, err := openRegular(path)
	if err != nil {
		if errors.Is(err, ErrNotTrace) {
			return nil, err
		}
		return nil, fmt.Errorf("reading the run manifest: %w", err)
	}
	defer f.Close()
	if st.Size() > maxManifest {
		return nil, fmt.Errorf("%w: %s is %d bytes; a run manifest is far smaller", ErrNotTrace, path, st.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	if err != nil {
		return nil, fmt.Errorf("reading the run manifest: %w", err)
	}
	if len(b) > maxManifest {
		return nil, fmt.Errorf("%w: %s is over %d bytes; a run manifest is far smaller", ErrNotTrace, path, maxManifest)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %s is not a run manifest: %v", ErrNotTrace, filepath.Join(dir, ManifestFile), err)
	}
	if m.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("%w: %s has format version %d, this commprof reads version %d", ErrVersion, filepath.Join(dir, ManifestFile), m.FormatVersion, FormatVersion)
	}
	if m.WorldSize < 0 || m.WorldSize > MaxWorldSize {
		return nil, fmt.Errorf("%w: %s says world_size %d; a run has 1 to %d ranks", ErrNotTrace, path, m.WorldSize, MaxWorldSize)
	}
	if len(m.Ranks) > MaxWorldSize {
		return nil, fmt.Errorf("%w: %s lists %d ranks; a run has at most %d", ErrNotTrace, path, len(m.Ranks), MaxWorldSize)
	}
	return &m, nil
}

// maxManifest bounds run.json: a million ranks' entries fit in it.
const maxManifest = 256 << 20

// Run is a whole run read back, with times on the aligned clock.
type Run struct {
	Dir      string
	Manifest *Manifest // nil if the run has no manifest
	Ranks    []Rank    // by rank
	// Problems lists what was wrong but not fatal: cut streams, missing
	// ranks, a missing manifest. Their events are still in Ranks.
	Problems []error
}

// Rank is one rank's events.
type Rank struct {
	Info      RankInfo
	File      string
	Bytes     int64 // size of the stream on disk
	Events    []Event
	Truncated *TruncatedError // non-nil if the stream was cut
}

// NumEvents returns the number of events in the run.
func (r *Run) NumEvents() int {
	n := 0
	for _, rk := range r.Ranks {
		n += len(rk.Events)
	}
	return n
}

// ReadRun reads every rank stream in dir, in parallel, and moves every
// event onto rank 0's clock using the manifest (or, without one, the
// offsets in the streams' metadata).
func ReadRun(dir string) (*Run, error) {
	rf, err := OpenRun(dir)
	if err != nil {
		return nil, err
	}
	m := rf.Manifest
	run := &Run{Dir: dir, Manifest: m}
	run.Ranks = make([]Rank, len(rf.Streams))
	errs := make([]error, len(rf.Streams))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, s := range rf.Streams {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			info, evs, err := ReadFile(s.Path)
			rk := Rank{Info: info, File: filepath.Base(s.Path), Events: evs, Bytes: s.Bytes}
			var te *TruncatedError
			if errors.As(err, &te) {
				rk.Truncated, err = te, nil
				if info == (RankInfo{}) {
					rk.Info.Rank = s.Rank // cut before its schema: the file's name is all there is
				}
			}
			if err == nil && rk.Info.Rank != s.Rank {
				err = fmt.Errorf("%w: %s holds rank %d's events", ErrNotTrace, s.Path, rk.Info.Rank)
			}
			run.Ranks[i], errs[i] = rk, err
		}()
	}
	wg.Wait()
	// A stream that is not a trace at all (its schema damaged, another
	// file put in its place) is left out, as a cut one is kept: the other
	// ranks are still read. A run none of whose streams can be read is
	// refused.
	var fatal, bad []error
	kept := run.Ranks[:0]
	for i, err := range errs {
		switch {
		case err == nil:
			kept = append(kept, run.Ranks[i])
		case errors.Is(err, ErrNotTrace):
			bad = append(bad, err)
			run.Problems = append(run.Problems, fmt.Errorf("%w; ignored", err))
		default:
			fatal = append(fatal, err)
		}
	}
	if len(fatal) > 0 {
		return nil, errors.Join(fatal...)
	}
	if len(kept) == 0 {
		return nil, errors.Join(bad...)
	}
	run.Ranks = kept
	sort.Slice(run.Ranks, func(i, j int) bool { return run.Ranks[i].Info.Rank < run.Ranks[j].Info.Rank })
	seen := map[int]bool{}
	for i := range run.Ranks {
		rk := &run.Ranks[i]
		if seen[rk.Info.Rank] {
			return nil, fmt.Errorf("%w: two streams in %s claim rank %d", ErrNotTrace, dir, rk.Info.Rank)
		}
		seen[rk.Info.Rank] = true
		if rk.Truncated != nil {
			run.Problems = append(run.Problems, fmt.Errorf("rank %d (%s): %w", rk.Info.Rank, rk.File, rk.Truncated))
		}
		align(rk, m)
	}
	run.Problems = append(run.Problems, rf.Problems...)
	return run, nil
}

// align moves a rank's events onto rank 0's clock.
func align(rk *Rank, m *Manifest) {
	off, drift, at := clockOf(rk.Info, m)
	if off == 0 && drift == 0 {
		return
	}
	for i := range rk.Events {
		e := &rk.Events[i]
		e.Start = alignTime(e.Start, off, drift, at)
	}
}
