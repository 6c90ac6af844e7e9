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

// run is a run directory that may be served.
type run struct {
	name string // its directory's name under the runs directory
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

// lookup resolves a run name to a run inside the runs directory, or
// errNoRun.
func (s *server) lookup(name string) (*run, error) {
	if !validName(name) {
		return nil, errNoRun
	}
	show := filepath.Join(s.cfg.RunsDir, name)
	real, err := filepath.EvalSymlinks(filepath.Join(s.root, name))
	if err != nil || !inside(s.root, real) {
		return nil, errNoRun
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return nil, errNoRun
	}
	fp, err := s.fingerprint(real)
	if err != nil || fp.files == 0 {
		return nil, errNoRun
	}
	return &run{name: name, dir: real, show: show, fp: fp}, nil
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
		p := filepath.Join(dir, n)
		if e.Type()&fs.ModeSymlink != 0 {
			real, err := filepath.EvalSymlinks(p)
			if err != nil || !inside(s.root, real) {
				return fingerprint{}, fmt.Errorf("%s links outside the runs directory", p)
			}
		}
		fi, err := os.Stat(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed since the listing
			}
			return fingerprint{}, err
		}
		if !fi.Mode().IsRegular() {
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
// cache or from another request's read.
func (s *server) load(ctx context.Context, r *run, keep *load.Keep) (sum *analyze.Summary, read *load.Run, err error) {
	sum, err = s.sums.get(ctx, r.name+"\x00"+r.fp.key, func(ctx context.Context) (*analyze.Summary, error) {
		start := time.Now()
		lr, err := load.Load(ctx, r.dir, keep)
		if err != nil {
			return nil, err
		}
		sum := lr.Summary
		// What `commprof stats RUNS_DIR/NAME` would say.
		sum.Run.Dir = r.show
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

// listed is a run as the index lists it, with the time it is sorted by.
type listed struct {
	info     report.RunInfo
	sortTime time.Time
}

func runURL(name string) string { return "runs/" + url.PathEscape(name) + "/" }

// info returns a run's key numbers, from the cache when its files have
// not changed. A run that cannot be summarized is listed with the error.
func (s *server) info(ctx context.Context, r *run) (listed, error) {
	return s.infos.get(ctx, r.name+"\x00"+r.fp.key, func(ctx context.Context) (listed, error) {
		l := listed{info: report.RunInfo{Name: r.name, Title: r.name, Report: runURL(r.name), Stats: runURL(r.name) + "stats.json"}, sortTime: r.fp.modTime}
		ri := &l.info
		if m, err := trace.ReadManifest(r.dir); err == nil {
			ri.Title, ri.Status, ri.WorldSize = m.Name, m.Status, m.WorldSize
			if !m.Start.IsZero() {
				ri.Start, l.sortTime = m.Start.Format(time.RFC3339), m.Start
			}
		}
		sum, err := s.summary(ctx, r)
		if isContextErr(err) {
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
		h := sum.Headline
		ri.Steps, ri.StepNS, ri.CommFraction, ri.BusBWGBps, ri.BusBWOp = h.Steps, h.StepNS, h.CommFraction, h.BusBWGBps, h.BusBWOp
		if acc, ok := sum.Run.Metrics["test_accuracy"]; ok {
			ri.Accuracy = &acc
		}
		ri.Problems = len(sum.Problems)
		if ri.Running() {
			ri.Problems = 0 // a run being written has cut streams by nature
		}
		return l, nil
	})
}

// runs lists the runs directly under the runs directory, newest first.
func (s *server) runs(ctx context.Context) ([]report.RunInfo, error) {
	ents, err := os.ReadDir(s.root)
	if err != nil {
		return nil, fmt.Errorf("listing the runs in %s: %w", s.cfg.RunsDir, err)
	}
	var found []*run
	for _, e := range ents {
		if !e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		if r, err := s.lookup(e.Name()); err == nil {
			found = append(found, r)
		}
	}
	out := make([]listed, len(found))
	errs := make([]error, len(found))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, r := range found {
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
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].sortTime.Equal(out[j].sortTime) {
			return out[i].sortTime.After(out[j].sortTime)
		}
		return out[i].info.Name < out[j].info.Name
	})
	infos := make([]report.RunInfo, len(out))
	for i, l := range out {
		infos[i] = l.info
	}
	return infos, nil
}
