package importers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/trace"
)

// Formats.
const (
	Auto          = "auto"
	Horovod       = "horovod"
	Kineto        = "kineto"
	NCCLLog       = "nccl-log"
	NCCLInspector = "nccl-inspector"
	NCCLTests     = "nccl-tests"
)

// Formats lists the formats Import reads, in the order detection tries them.
var Formats = []string{Horovod, Kineto, NCCLInspector, NCCLTests, NCCLLog}

// Options configure an import.
type Options struct {
	// Format is one of Formats, or "" / Auto to detect it from the content.
	Format string
	// Out is the run directory to write; it must not exist, be empty, or
	// (with Force) hold a run to replace.
	Out   string
	Force bool
	// Name names the run (default: from the first input's file name).
	Name string
	// Command is recorded in the manifest (the command line that imported).
	Command []string
	// CommprofVersion is recorded in the manifest.
	CommprofVersion string
	// Codec compresses the streams (default zstd).
	Codec trace.Codec
	// Op names the collective of an nccl-tests table whose output does
	// not (older nccl-tests print no test name): allreduce, allgather, ...
	Op string
	// Progress, when set, is called as input bytes are read (compressed
	// bytes for gzipped inputs), from the importing goroutine.
	Progress func(file string, done, total int64)
}

// Result says what an import did.
type Result struct {
	Format     string
	Dir        string
	Files      []string
	Manifest   *trace.Manifest
	Ranks      int
	Events     int64
	InputBytes int64
	// Summary holds the importer's own counts, in words, for the command
	// to print ("1304 collectives, 59 with every rank's arrival").
	Summary []string
}

// run is what a format's importer learns besides the events.
type run struct {
	format  string
	tool    string
	phases  bool // the compute spans are the tool's phases (Source.ToolPhases)
	world   int
	start   time.Time
	clock   trace.Clock
	config  map[string]string
	metrics map[string]float64
	missing []string
	skipped map[string]int64

	// untimed: the events are placed in order, not in time; noDurations:
	// their starts are times, their durations are not; partialRanks: some
	// ranks hold only part of the calls (Source.Untimed, NoDurations,
	// PartialRanks).
	untimed, noDurations, partialRanks bool

	// cut lists inputs that ended early, in words.
	cut     []string
	ranks   map[int]trace.RankInfo // by spool id: the final facts
	shift   map[int]int64          // by spool id: ns added to every time at finish
	summary []string
}

func newRun(format string) *run {
	return &run{format: format, config: map[string]string{}, metrics: map[string]float64{}, skipped: map[string]int64{},
		ranks: map[int]trace.RankInfo{}, shift: map[int]int64{}, clock: trace.Clock{Method: "same-host"}}
}

func (r *run) skip(reason string, n int64) {
	if n > 0 {
		r.skipped[reason] += n
	}
}

func (r *run) missingf(format string, a ...any) {
	r.missing = append(r.missing, fmt.Sprintf(format, a...))
}

func (r *run) summaryf(format string, a ...any) {
	r.summary = append(r.summary, fmt.Sprintf(format, a...))
}

// importer is one format's entry point: it reads the inputs (opened in
// order) into the sink and fills r.
type importer func(ctx context.Context, ins []*input, s *sink, r *run, opt *Options) error

var importersByFormat = map[string]importer{
	Horovod:       importHorovod,
	Kineto:        importKineto,
	NCCLLog:       importNCCLLog,
	NCCLInspector: importInspector,
	NCCLTests:     importNCCLTests,
}

// ParseFormat checks a --format value.
func ParseFormat(s string) (string, error) {
	if s == "" || s == Auto {
		return Auto, nil
	}
	if _, ok := importersByFormat[s]; ok {
		return s, nil
	}
	return "", fmt.Errorf("unknown format %q (want auto, %s)", s, strings.Join(Formats, ", "))
}

// DefaultName returns a run name made from an input's file name.
func DefaultName(path string) string {
	base := filepath.Base(filepath.Clean(path))
	for _, ext := range []string{".gz", ".json", ".log", ".txt", ".dat", ".out"} {
		base = strings.TrimSuffix(base, ext)
	}
	base = strings.TrimSuffix(base, ".pt.trace")
	name := rundir.SafeName(base)
	if len(name) > 48 {
		name = name[:48]
	}
	if name == "" {
		name = "import"
	}
	return name
}

// Import reads the traces in paths (files, or directories of files) into
// a new run in opt.Out. When the context is cancelled it writes the
// events read so far as an interrupted run and returns the context's
// error.
func Import(ctx context.Context, paths []string, opt Options) (*Result, error) {
	format, err := ParseFormat(opt.Format)
	if err != nil {
		return nil, err
	}
	if opt.Out == "" {
		return nil, errors.New("no output directory")
	}
	if opt.Codec == "" {
		opt.Codec = trace.Zstd
	}
	files, err := expandPaths(paths)
	if err != nil {
		return nil, err
	}
	// Each input is opened once and read once, as a stream: a pipe, a
	// FIFO or a process substitution (<(cat trace.json)) is read as a
	// file is.
	ins := make([]*input, 0, len(files))
	defer func() {
		for _, in := range ins {
			in.Close()
		}
	}()
	var inputBytes int64
	for _, f := range files {
		in, err := openInput(ctx, f, opt.Progress)
		if err != nil {
			return nil, err
		}
		ins = append(ins, in)
		inputBytes += in.size
	}
	// The format: given (the importer then refuses input that is not of
	// it), or detected from each file's content; the files of one import
	// must agree.
	if format == Auto {
		for i, in := range ins {
			ff, why := in.detect()
			if ff == "" {
				if err := ctx.Err(); err != nil {
					return nil, fmt.Errorf("import interrupted: %w", err)
				}
				return nil, notFormat(in.path, 1, 0, "%s", why)
			}
			if i == 0 {
				format = ff
			} else if ff != format {
				return nil, fmt.Errorf("%s holds a %s trace but %s a %s trace: import them separately", files[0], format, in.path, ff)
			}
		}
	}
	created := false
	if _, err := os.Stat(opt.Out); errors.Is(err, os.ErrNotExist) {
		created = true
	}
	rd, err := rundir.Take(opt.Out, opt.Force)
	if err != nil {
		return nil, err
	}
	defer rd.Release()
	name := opt.Name
	if name == "" {
		name = DefaultName(files[0])
	}
	runID := rundir.NewID(name)

	s := newSink(opt.Out, opt.Codec, runID)
	r := newRun(format)
	err = importersByFormat[format](ctx, ins, s, r, &opt)
	for _, in := range ins {
		if nerr := in.noRecord(format); nerr != nil {
			err = nerr
			break
		}
	}
	if err != nil {
		s.discard()
		cleanup(rd, created)
		return nil, err
	}
	if len(s.streams) == 0 {
		s.discard()
		cleanup(rd, created)
		return nil, fmt.Errorf("%s: no events to import", strings.Join(files, ", "))
	}
	entries, err := s.finish(r.ranks, r.shift)
	if err != nil {
		cleanup(rd, created)
		return nil, err
	}
	m := &trace.Manifest{
		FormatVersion: trace.FormatVersion, CommprofVersion: opt.CommprofVersion, RunID: runID, Name: name,
		WorldSize: r.world, Launcher: "import", Command: opt.Command, Config: r.config, Metrics: r.metrics,
		Codec: opt.Codec, Start: r.start, Status: trace.StatusComplete, Clock: r.clock, Ranks: entries,
		Source: &trace.Source{Format: format, Tool: r.tool, Files: files, CollectiveMessages: false, ToolPhases: r.phases,
			Untimed: r.untimed, NoDurations: r.noDurations, PartialRanks: r.partialRanks, Missing: r.missing, Skipped: r.skipped},
	}
	if m.WorldSize < len(entries) {
		m.WorldSize = len(entries)
	}
	if len(m.Config) == 0 {
		m.Config = nil
	}
	if len(m.Metrics) == 0 {
		m.Metrics = nil
	}
	if len(r.skipped) == 0 {
		m.Source.Skipped = nil
	}
	if len(r.cut) > 0 {
		m.Status = trace.StatusInterrupted
		m.Error = "input cut short: " + strings.Join(r.cut, "; ")
	}
	if ctx.Err() != nil {
		m.Status = trace.StatusInterrupted
		m.Error = "the import was interrupted; the run holds the events read before"
	}
	if err := rundir.Finish(opt.Out, func(*trace.Manifest) (*trace.Manifest, error) { return m, nil }); err != nil {
		return nil, err
	}
	inputBytes = 0
	for _, in := range ins {
		inputBytes += max(in.size, in.raw.n) // a pipe has no size: what was read
	}
	res := &Result{Format: format, Dir: opt.Out, Files: files, Manifest: m, Ranks: len(entries), Events: s.events,
		InputBytes: inputBytes, Summary: r.summary}
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("import interrupted: %s holds the events read before: %w", opt.Out, err)
	}
	return res, nil
}

// cleanup removes what a failed import created.
func cleanup(rd *rundir.Dir, created bool) {
	os.Remove(filepath.Join(rd.Path, trace.ManifestFile))
	if created {
		rd.Discard()
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
