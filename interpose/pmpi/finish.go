package pmpi

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/trace"
)

// Names the library gives its marks (docs/mpi.md).
const (
	MarkInit     = "mpi.init"     // MPI_Init returned; value: seconds it took
	MarkFinalize = "mpi.finalize" // MPI_Finalize was called; value: seconds it took
	MarkComm     = "mpi.comm"     // this rank belongs to comm: seq is its rank there, value the size
	MarkAbort    = "mpi.abort"    // MPI_Abort was called; value: the error code
	MarkLost     = "mpi.lost"     // events the library could not keep; value: how many
	MarkPcontrol = "mpi.pcontrol" // MPI_Pcontrol: value 0 paused the recording, another resumed it
)

// Missing is what a PMPI run cannot show, for the manifest's source.
var Missing = []string{"messages inside the MPI library's collective algorithms"}

// ErrNotRecorded means the launcher ran but no rank wrote a stream.
var ErrNotRecorded = errors.New("no rank was recorded")

// FinishOptions describe the run Finish completes.
type FinishOptions struct {
	Name, RunID     string
	Command         []string // as recorded (commprof record -- mpirun ...)
	Flavor          Flavor
	CommprofVersion string
	Start           time.Time
	// LauncherErr is the launcher's failure (a non-zero exit), if any.
	LauncherErr error
	Interrupted bool
	// Compact rewrites the streams of a complete run as large batches
	// compressed with Codec (the library writes them as zstd, or
	// uncompressed when Codec is none).
	Compact bool
	Codec   trace.Codec
	Warn    func(error) // hears of streams that could not be compacted
}

// compactSmallest is the most events a stream is compacted at zstd's
// smallest level.
const compactSmallest = 4 << 20

// stream is what Finish learns from one rank's stream.
type stream struct {
	info    trace.RankInfo
	cut     error
	events  int64
	batches int64
}

// Finish completes the manifest of a run recorded by the PMPI library in
// dir, once its launcher has exited: rank 0 of the library wrote it when
// MPI_Init returned and again in MPI_Finalize, if it got there; Finish
// adds what only the launcher's side knows (the command, whether the
// launcher failed, which streams were cut) and the communicators the
// ranks made, and compacts the streams of a complete run. It returns
// ErrNotRecorded when no rank wrote a stream.
func Finish(dir string, o FinishOptions) (*trace.Manifest, error) {
	rf, err := trace.OpenRun(dir)
	if err != nil {
		if errors.Is(err, trace.ErrNotTrace) && !hasStreams(dir) {
			return nil, ErrNotRecorded
		}
		return nil, err
	}
	streams := make([]stream, len(rf.Streams))
	comms := map[string]map[int64]int32{} // communicator -> its rank -> world rank
	sizes := map[string]int{}
	var lost float64
	for i := range rf.Streams {
		s := &streams[i]
		err := rf.ScanStream(i, []string{trace.ColKind, trace.ColName, trace.ColSeq, trace.ColComm, trace.ColValue},
			func(info trace.RankInfo, b *trace.Batch) error {
				s.info = info
				s.events += int64(b.Len)
				s.batches++
				for j := 0; j < b.Len; j++ {
					if b.Kind[j] != trace.KindMark {
						continue
					}
					switch b.Names[b.Name[j]] {
					case MarkComm:
						c := b.Comms[b.Comm[j]]
						if comms[c] == nil {
							comms[c] = map[int64]int32{}
						}
						comms[c][b.Seq[j]] = int32(info.Rank)
						sizes[c] = int(b.Value[j])
					case MarkLost:
						lost += b.Value[j]
					}
				}
				return nil
			})
		var te *trace.TruncatedError
		switch {
		case errors.As(err, &te):
			s.cut = te
		case err != nil:
			return nil, err
		}
		if s.batches == 0 {
			s.info = infoOf(rf.Streams[i].Path)
		}
	}

	m := rf.Manifest
	if m == nil {
		m = &trace.Manifest{Start: o.Start, Status: trace.StatusRunning}
	}
	m.FormatVersion = trace.FormatVersion
	if o.CommprofVersion != "" {
		m.CommprofVersion = o.CommprofVersion
	}
	if m.Name == "" {
		m.Name = o.Name
	}
	if m.RunID == "" {
		m.RunID = o.RunID
	}
	if len(o.Command) > 0 {
		m.Command = o.Command
	}
	if m.Launcher == "" {
		m.Launcher = "mpi"
	}
	if m.Start.IsZero() {
		m.Start = o.Start
	}
	for _, s := range streams {
		m.WorldSize = max(m.WorldSize, s.info.WorldSize)
	}
	if len(m.Ranks) == 0 {
		for i, s := range streams {
			m.Ranks = append(m.Ranks, trace.RankEntry{Rank: rf.Streams[i].Rank, Host: s.info.Host, PID: s.info.PID,
				File: filepath.Base(rf.Streams[i].Path), ClockOffsetNS: s.info.ClockOffsetNS})
		}
		m.Clock.Method = "same-host"
	}
	// What each stream holds, counted as Finish read it (a cut stream:
	// what was read before the cut).
	for i := range m.Ranks {
		for j, st := range rf.Streams {
			if st.Rank == m.Ranks[i].Rank {
				m.Ranks[i].Events = streams[j].events
			}
		}
	}
	if m.Source == nil {
		m.Source = &trace.Source{Format: "pmpi"}
	}
	m.Source.CollectiveMessages = false
	if len(m.Source.Missing) == 0 {
		m.Source.Missing = Missing
	}
	if lost > 0 {
		if m.Source.Skipped == nil {
			m.Source.Skipped = map[string]int64{}
		}
		m.Source.Skipped["events not recorded: the library's buffers or request table were full"] = int64(lost)
	}
	if m.Config == nil {
		m.Config = map[string]string{}
	}
	if o.Flavor != "" {
		m.Config["mpi"] = string(o.Flavor)
	}
	describeComms(m.Config, comms, sizes)

	// How the run ended.
	var problems []string
	have := map[int]bool{}
	for i, s := range streams {
		rank := rf.Streams[i].Rank
		have[rank] = true
		switch cause, finalized := whyStopped(dir, rank); {
		case cause != "" && finalized:
			problems = append(problems, fmt.Sprintf("rank %d stopped recording (%s): it reached MPI_Finalize, and its stream holds the events before", rank, cause))
		case cause != "":
			problems = append(problems, fmt.Sprintf("rank %d stopped recording (%s): its stream holds the events before", rank, cause))
		case s.cut != nil:
			problems = append(problems, fmt.Sprintf("rank %d's stream was cut (it ended without MPI_Finalize)", rank))
		}
	}
	removeWhy(dir)
	var absent []string
	for r := range m.WorldSize {
		if !have[r] {
			absent = append(absent, strconv.Itoa(r))
		}
	}
	if len(absent) > 0 {
		problems = append(problems, "no stream from rank "+strings.Join(absent, ", "))
	}
	switch {
	case o.Interrupted:
		m.Status = trace.StatusInterrupted
	case o.LauncherErr != nil || len(problems) > 0 || m.Status == trace.StatusRunning:
		m.Status = trace.StatusFailed
		var why []string
		if o.LauncherErr != nil {
			why = append(why, o.LauncherErr.Error())
		}
		why = append(why, problems...)
		if len(why) == 0 {
			why = append(why, "rank 0 did not reach MPI_Finalize")
		}
		m.Error = strings.Join(why, "; ")
	default:
		m.Status = trace.StatusComplete
	}
	if m.End.IsZero() {
		m.End = time.Now()
	}
	// The library compresses its batches with zstd as it writes them,
	// unless told none (record --codec none).
	m.Codec = trace.Zstd
	if o.Codec == trace.None {
		m.Codec = trace.None
	}
	if m.Status == trace.StatusComplete && o.Compact {
		// The streams are compacted side by side, at zstd's smallest
		// level up to compactSmallest events a stream (4.7 rather than
		// 5.0 bytes an event on an allreduce loop, for some 2.5 s of CPU a
		// million events), at the fast level beyond.
		errs := make([]error, len(streams))
		sem := make(chan struct{}, runtime.GOMAXPROCS(0))
		var wg sync.WaitGroup
		for i, s := range streams {
			level := trace.LevelFast
			if s.events <= compactSmallest || s.batches > 0 && s.events/s.batches < 4096 {
				level = trace.LevelSmallest
			}
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				_, errs[i] = trace.Compact(rf.Streams[i].Path, trace.CompactOptions{Codec: o.Codec, Level: level})
			}()
		}
		wg.Wait()
		all := true
		for i, err := range errs {
			if err != nil {
				all = false
				if o.Warn != nil {
					o.Warn(fmt.Errorf("rank %d's stream is kept as written: %w", rf.Streams[i].Rank, err))
				}
			}
		}
		if all {
			m.Codec = o.Codec
		}
	}
	if err := rundir.Finish(dir, func(*trace.Manifest) (*trace.Manifest, error) { return m, nil }); err != nil {
		return nil, err
	}
	return m, nil
}

// whyFile is where the library says why a rank stopped recording (a
// write error: a full disk), written over space it took when it made
// the stream, so that a full disk does not lose the cause: lines of
// text, the cause first, then "reached MPI_Finalize" if the rank did.
func whyFile(dir string, rank int) string {
	return filepath.Join(dir, fmt.Sprintf(".rank-%05d.why", rank))
}

// whyStopped reads a rank's whyFile: the cause ("" none) and whether the
// rank reached MPI_Finalize.
func whyStopped(dir string, rank int) (cause string, finalized bool) {
	b, err := os.ReadFile(whyFile(dir, rank))
	if err != nil {
		return "", false
	}
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i] // the space taken and not written
	}
	for _, line := range strings.Split(string(b), "\n") {
		switch line = strings.TrimSpace(line); {
		case line == "reached MPI_Finalize":
			finalized = true
		case line != "" && cause == "":
			// strerror's "No space left on device" as Go says it
			if i := strings.LastIndex(line, ": "); i >= 0 && i+3 <= len(line) {
				line = line[:i+2] + strings.ToLower(line[i+2:i+3]) + line[i+3:]
			}
			cause = line
		}
	}
	return cause, finalized
}

// removeWhy removes the whyFiles once read.
func removeWhy(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, ".rank-*.why"))
	for _, f := range files {
		os.Remove(f)
	}
}

func hasStreams(dir string) bool {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "rank-") && strings.HasSuffix(e.Name(), ".arrows") {
			return true
		}
	}
	return false
}

// infoOf reads a stream's metadata (for a stream without batches).
func infoOf(path string) trace.RankInfo {
	f, err := os.Open(path)
	if err != nil {
		return trace.RankInfo{}
	}
	defer f.Close()
	r, err := trace.NewReader(f, trace.ReaderOptions{})
	if err != nil {
		return trace.RankInfo{}
	}
	defer r.Release()
	return r.Info()
}

// maxComms bounds the communicators named in the manifest's config.
const maxComms = 64

// describeComms puts the communicators the ranks made in config: the key
// "comm NAME", the value its members' world ranks in its rank order
// ("0-3", "1,3,5"), "?" for a member whose stream does not say.
func describeComms(config map[string]string, comms map[string]map[int64]int32, sizes map[string]int) {
	names := make([]string, 0, len(comms))
	for c := range comms {
		names = append(names, c)
	}
	trace.SortComms(names)
	if len(names) > 0 {
		config[trace.ConfigComms] = strconv.Itoa(len(names))
	}
	for i, c := range names {
		if i == maxComms {
			config[trace.ConfigComms] += fmt.Sprintf(" (the first %d named here)", maxComms)
			break
		}
		n := sizes[c]
		ranks := make([]int32, n)
		for k := range ranks {
			ranks[k] = -1
		}
		for local, w := range comms[c] {
			if local >= 0 && local < int64(n) {
				ranks[local] = w
			}
		}
		config[trace.ConfigCommPrefix+c] = trace.RankList(ranks)
	}
}
