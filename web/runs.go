package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/report"
	"github.com/commprof/commprof/trace"
)

// errNoRun is what every lookup of a run that cannot be served returns,
// whatever the reason (a bad name, a path outside the runs directory, a
// directory that holds no run), so that a response never tells which.
var errNoRun = errors.New("no such run")

// validName reports whether name can be a run: one path element, not
// hidden, nothing that a file system or a URL reads specially.
func validName(name string) bool {
	if name == "" || len(name) > 255 || name[0] == '.' || !utf8.ValidString(name) {
		return false
	}
	return !strings.ContainsAny(name, "/\\\x00") && !filepath.IsAbs(name) && filepath.VolumeName(name) == ""
}

// inside reports whether p (absolute, symlinks resolved) is strictly
// inside root.
func inside(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == "." || filepath.IsAbs(rel) {
		return false
	}
	return rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// A run's id is its path under the runs directory: NAME for a run
// directly under it, SWEEP/NAME for a run inside a sweep's directory.
// Each part is a valid name; nothing deeper is a run.
func splitID(id string) (sweep, name string, ok bool) {
	sweep, name, nested := strings.Cut(id, "/")
	if !nested {
		return "", id, validName(id)
	}
	return sweep, name, validName(sweep) && validName(name)
}

// run is a run directory that may be served.
type run struct {
	name string // its id: its path under the runs directory, as in its URLs
	dir  string // its real path: absolute, symlinks resolved, inside the runs directory
	// show is the path as the user named it (the configured runs
	// directory joined with name): what summaries and pages show.
	show string
	fp   fingerprint
}

// fingerprint identifies the state of a run's files: it changes when any
// of them is written, added or removed.
type fingerprint struct {
	key     string    // hash of every file's name, size and mtime
	files   int       // run.json and rank streams
	modTime time.Time // the latest mtime
}

// etag is the fingerprint as an HTTP entity tag of a page drawn by the
// server started at boot (another server may draw it otherwise).
func (f fingerprint) etag(kind, boot string) string {
	return `"` + kind + "-" + boot + "-" + f.key + `"`
}

// resolve returns the real path of rel (a path under the runs directory)
// when it is a directory strictly inside the runs directory.
func (s *server) resolve(rel string) (string, bool) {
	real, err := filepath.EvalSymlinks(filepath.Join(s.root, filepath.FromSlash(rel)))
	if err != nil || !inside(s.root, real) {
		return "", false
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", false
	}
	return real, true
}

// lookup resolves a run id to a run inside the runs directory, or
// errNoRun. A run inside a sweep is one whose parent directory is not a
// run itself.
func (s *server) lookup(id string) (*run, error) {
	sweep, name, ok := splitID(id)
	if !ok {
		return nil, errNoRun
	}
	if sweep != "" {
		parent, ok := s.resolve(sweep)
		if !ok {
			return nil, errNoRun
		}
		if fp, err := s.fingerprint(parent); err != nil || fp.files > 0 {
			return nil, errNoRun
		}
		return s.lookupIn(sweep, name)
	}
	return s.lookupIn("", name)
}

// lookupIn resolves the run name in the sweep directory sweep (already
// checked), or directly under the runs directory when sweep is "".
func (s *server) lookupIn(sweep, name string) (*run, error) {
	id := name
	if sweep != "" {
		id = sweep + "/" + name
	}
	real, ok := s.resolve(id)
	if !ok {
		return nil, errNoRun
	}
	fp, err := s.fingerprint(real)
	if err != nil || fp.files == 0 {
		return nil, errNoRun
	}
	// The recorder's liveness is part of the run's state: a run whose
	// recorder dies changes no file but becomes abandoned.
	if m, err := trace.ReadManifest(real); err == nil && m.Status == trace.StatusRunning && !rundir.Alive(real) {
		fp.key += "-abandoned"
	}
	return &run{name: id, dir: real, show: filepath.Join(s.cfg.RunsDir, filepath.FromSlash(id)), fp: fp}, nil
}

// fingerprint lists a run directory's manifest and rank streams. A file
// among them that is a link to anything outside the runs directory makes
// the whole run unservable.
func (s *server) fingerprint(dir string) (fingerprint, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fingerprint{}, err
	}
	h := sha256.New()
	var fp fingerprint
	for _, e := range ents { // sorted by name
		n := e.Name()
		if n != trace.ManifestFile && !(strings.HasPrefix(n, "rank-") && strings.HasSuffix(n, ".arrows")) {
			continue
		}
		fi, ok, err := s.member(dir, e)
		if err != nil {
			return fingerprint{}, err
		}
		if !ok {
			continue
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\x00", n, fi.Size(), fi.ModTime().UnixNano())
		fp.files++
		if fi.ModTime().After(fp.modTime) {
			fp.modTime = fi.ModTime()
		}
	}
	fp.key = hex.EncodeToString(h.Sum(nil)[:12])
	return fp, nil
}

// member stats a file of a run or sweep directory: ok when it is a
// regular file (following a link only to inside the runs directory), an
// error when it links outside.
func (s *server) member(dir string, e fs.DirEntry) (fs.FileInfo, bool, error) {
	p := filepath.Join(dir, e.Name())
	if e.Type()&fs.ModeSymlink != 0 {
		real, err := filepath.EvalSymlinks(p)
		if err != nil || !inside(s.root, real) {
			return nil, false, fmt.Errorf("%s links outside the runs directory", p)
		}
	}
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil // removed since the listing
		}
		return nil, false, err
	}
	return fi, fi.Mode().IsRegular(), nil
}

// summary returns the run's summary, from the cache when its files have
// not changed. The summary is shared: callers must not change it.
func (s *server) summary(ctx context.Context, r *run) (*analyze.Summary, error) {
	sum, _, err := s.load(ctx, r, nil)
	return sum, err
}

// load returns the run's summary as summary does. When the summary is not
// in the cache, load reads the run for it, keeping the events keep asks
// for (nil: none), and returns that read too, so that a page that needs
// them reads the run once; read is nil when the summary came from the
// cache or from another request's read. Reading takes a build slot.
func (s *server) load(ctx context.Context, r *run, keep *load.Keep) (sum *analyze.Summary, read *load.Run, err error) {
	sum, err = s.sums.get(ctx, r.name+"\x00"+r.fp.key, func(ctx context.Context) (*analyze.Summary, error) {
		ctx, release, err := s.build(ctx, "summary")
		if err != nil {
			return nil, err
		}
		defer release()
		start := time.Now()
		lr, err := load.Load(ctx, r.dir, keep)
		if err != nil {
			return nil, err
		}
		sum := lr.Summary
		// What `commprof stats RUNS_DIR/NAME` would say.
		sum.Run.Dir = r.show
		if strings.HasSuffix(r.fp.key, "-abandoned") {
			sum.Run.Status = trace.StatusAbandoned
		}
		// A run that did not end well leads with the doctor's diagnosis,
		// as stats and report do.
		load.AttachDiagnosis(ctx, r.dir, sum)
		// A live page asks every few seconds: say only what took long.
		if took := time.Since(start); took >= time.Second {
			s.logf("summarized %s: %d events in %s", r.name, sum.Run.Events, took.Round(time.Millisecond))
		}
		read = lr
		return sum, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return sum, read, nil
}

// listed is a run or a sweep as the index lists it, with the time it is
// sorted by.
type listed struct {
	info     report.RunEntry
	sortTime time.Time
}

// runURL is the URL of a run's (or a sweep's) page, relative to the
// server's root.
func runURL(id string) string {
	parts := strings.Split(id, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return "runs/" + strings.Join(parts, "/") + "/"
}

// info returns a run's key numbers, from the cache when its files have
// not changed. A run that cannot be summarized is listed with the error;
// one that the server is too busy to summarize now is listed without its
// figures, and not kept.
func (s *server) info(ctx context.Context, r *run) (listed, error) {
	l, err := s.infos.get(ctx, r.name+"\x00"+r.fp.key, func(ctx context.Context) (listed, error) {
		l := listed{info: report.RunEntry{Name: r.name, Kind: report.KindRun, Title: r.name, Report: runURL(r.name), Stats: runURL(r.name) + "stats.json"},
			sortTime: r.fp.modTime}
		ri := &l.info
		if sweep, _, _ := splitID(r.name); sweep != "" {
			ri.Sweep = sweep
		}
		m, err := trace.ReadManifest(r.dir)
		if err == nil {
			ri.Title, ri.Status, ri.WorldSize = m.Name, rundir.Status(r.dir, m), m.WorldSize
			if !m.Start.IsZero() {
				ri.Start, l.sortTime = m.Start.Format(time.RFC3339), m.Start
			}
			ri.SetConfig(m.Config, m.Metrics)
		}
		sum, err := s.summary(ctx, r)
		if isContextErr(err) || errors.Is(err, errBusy) {
			ri.Pending = errors.Is(err, errBusy)
			return l, err
		}
		if err != nil {
			if ri.Running() && errors.Is(err, trace.ErrNotTrace) {
				return l, nil // started, no events yet
			}
			ri.Error = err.Error()
			return l, nil
		}
		ri.Title = sum.Run.Name
		if ri.Title == "" {
			ri.Title = r.name
		}
		ri.Status, ri.WorldSize, ri.Events, ri.DiskBytes = sum.Run.Status, sum.Run.WorldSize, sum.Run.Events, sum.Run.DiskBytes
		ri.SetConfig(sum.Run.Config, sum.Run.Metrics)
		if sum.Run.SamplesPerStep > 0 {
			ri.GlobalBatch = sum.Run.SamplesPerStep
		}
		ri.SamplesPerSec = sum.StepSummary.SamplesPerSec
		h := sum.Headline
		ri.Steps, ri.StepNS, ri.CommFraction, ri.BusBWGBps, ri.BusBWOp = h.Steps, h.StepNS, h.CommFraction, h.BusBWGBps, h.BusBWOp
		ri.CommUnknown = sum.IsUnknown("comm") || sum.IsUnknown("communication")
		ri.Problems = len(sum.Problems)
		if ri.Running() {
			ri.Problems = 0 // a run being written has cut streams by nature
		}
		return l, nil
	})
	if errors.Is(err, errBusy) {
		return l, nil
	}
	return l, err
}

// runs lists the runs and sweeps directly under the runs directory,
// newest first, each sweep with its runs.
func (s *server) runs(ctx context.Context) ([]report.RunEntry, error) {
	ents, err := os.ReadDir(s.root)
	if err != nil {
		return nil, fmt.Errorf("listing the runs in %s: %w", s.cfg.RunsDir, err)
	}
	var found []*run
	var sweeps []*sweepDir
	for _, e := range ents {
		if !e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		if r, err := s.lookup(e.Name()); err == nil {
			found = append(found, r)
		} else if sd, err := s.lookupSweep(e.Name()); err == nil {
			sweeps = append(sweeps, sd)
		}
	}
	top, err := s.infosOf(ctx, found)
	if err != nil {
		return nil, err
	}
	for _, sd := range sweeps {
		var kids []*run
		for _, id := range sd.runs {
			if r, err := s.lookup(id); err == nil {
				kids = append(kids, r)
			}
		}
		ls, err := s.infosOf(ctx, kids)
		if err != nil {
			return nil, err
		}
		top = append(top, s.sweepInfo(ctx, sd, ls))
	}
	infos := make([]report.RunEntry, len(top))
	for i, l := range newestFirst(top) {
		infos[i] = l.info
	}
	return infos, nil
}

// infosOf returns the runs' listings, a few at a time.
func (s *server) infosOf(ctx context.Context, runs []*run) ([]listed, error) {
	out := make([]listed, len(runs))
	errs := make([]error, len(runs))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i], errs[i] = s.info(ctx, r)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for i, r := range runs {
		// Whether the recorder still runs is read at every listing.
		if out[i].info.Status == trace.StatusRunning && !rundir.Alive(r.dir) {
			out[i].info.Status = trace.StatusAbandoned
		}
	}
	return out, nil
}

func newestFirst(ls []listed) []listed {
	sort.SliceStable(ls, func(i, j int) bool {
		if !ls[i].sortTime.Equal(ls[j].sortTime) {
			return ls[i].sortTime.After(ls[j].sortTime)
		}
		return ls[i].info.Name < ls[j].info.Name
	})
	return ls
}
