package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/report"
	"github.com/commprof/commprof/trace"
)

// maxSweepFile bounds what the server reads of a sweep.json: a sweep of
// thousands of configurations is a few MB.
const maxSweepFile = 32 << 20

// errNoSweepFile is a sweep directory without its sweep.json yet.
var errNoSweepFile = errors.New("no " + rundir.SweepFile)

// sweepDir is a sweep's directory directly under the runs directory: it
// is not a run, and holds sweep.json or runs (a sweep being recorded has
// only runs yet).
type sweepDir struct {
	name string // its directory's name, as in its URL
	dir  string // its real path, inside the runs directory
	show string // the path as the user named it
	file fs.FileInfo
	bad  error    // sweep.json is there but cannot be read as a file
	runs []string // ids (SWEEP/NAME) of its runs, by name
}

// key identifies the state of the sweep's sweep.json.
func (sd *sweepDir) key() string {
	if sd.file == nil {
		return "none"
	}
	return fmt.Sprintf("%d-%d", sd.file.Size(), sd.file.ModTime().UnixNano())
}

// lookupSweep resolves a name to a sweep directory inside the runs
// directory, or errNoRun.
func (s *server) lookupSweep(name string) (*sweepDir, error) {
	if !validName(name) {
		return nil, errNoRun
	}
	real, ok := s.resolve(name)
	if !ok {
		return nil, errNoRun
	}
	if fp, err := s.fingerprint(real); err != nil || fp.files > 0 {
		return nil, errNoRun // a run, or one that cannot be served
	}
	ents, err := os.ReadDir(real)
	if err != nil {
		return nil, errNoRun
	}
	sd := &sweepDir{name: name, dir: real, show: filepath.Join(s.cfg.RunsDir, name)}
	for _, e := range ents {
		n := e.Name()
		if n == rundir.SweepFile {
			fi, ok, err := s.member(real, e)
			switch {
			case err != nil:
				sd.bad = fmt.Errorf("%s links outside the runs directory", filepath.Join(sd.show, rundir.SweepFile))
			case ok:
				sd.file = fi
			case fi != nil:
				sd.bad = fmt.Errorf("%s is not a regular file (%s)", filepath.Join(sd.show, rundir.SweepFile), fi.Mode().Type())
			}
			continue
		}
		if !validName(n) || !e.IsDir() && e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		if r, err := s.lookupIn(name, n); err == nil {
			sd.runs = append(sd.runs, r.name)
		}
	}
	if sd.file == nil && sd.bad == nil && len(sd.runs) == 0 {
		return nil, errNoRun
	}
	return sd, nil
}

// readSweep reads and checks the sweep's sweep.json, from the cache when
// it has not changed. The sweep is shared: callers must not change it.
func (s *server) readSweep(ctx context.Context, sd *sweepDir) (*analyze.Sweep, error) {
	switch {
	case sd.bad != nil:
		return nil, sd.bad
	case sd.file == nil:
		return nil, errNoSweepFile
	}
	return s.sweeps.get(ctx, sd.name+"\x00"+sd.key(), func(context.Context) (*analyze.Sweep, error) {
		path := filepath.Join(sd.show, rundir.SweepFile)
		if sd.file.Size() > maxSweepFile {
			return nil, fmt.Errorf("%s is %d bytes; a sweep's is far smaller", path, sd.file.Size())
		}
		b, err := os.ReadFile(filepath.Join(sd.dir, rundir.SweepFile))
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		var sw analyze.Sweep
		if err := json.Unmarshal(b, &sw); err != nil {
			return nil, fmt.Errorf("%s is damaged: %w", path, err)
		}
		if sw.Configs == nil {
			return nil, fmt.Errorf("%s is damaged: it holds no configurations list", path)
		}
		for i, c := range sw.Configs {
			if c.BatchSize < 0 || c.Ranks < 0 || c.GlobalBatch < 0 || c.Ranks > trace.MaxWorldSize {
				return nil, fmt.Errorf("%s is damaged: configuration %d has batch size %d and %d ranks", path, i+1, c.BatchSize, c.Ranks)
			}
		}
		return &sw, nil
	})
}

// sweepProblem says why a sweep's page cannot be drawn and what to do,
// for the list of runs and the page itself. running is how many of its
// runs are being recorded.
func sweepProblem(sd *sweepDir, err error, running int) string {
	switch {
	case errors.Is(err, errNoSweepFile) && running > 0:
		return fmt.Sprintf("This sweep is being recorded: %d of its runs so far, %d recording now. `commprof sweep` writes %s, and this page, when its last run ends; until then its runs are listed with it.",
			len(sd.runs), running, rundir.SweepFile)
	case errors.Is(err, errNoSweepFile):
		return fmt.Sprintf("%s has no %s: the sweep was stopped before it could write it, or this is not a sweep's directory. Run the same `commprof sweep --out %s ...` command again: it keeps the finished runs and writes %s. Its %d runs are listed with it.",
			sd.show, rundir.SweepFile, sd.show, rundir.SweepFile, len(sd.runs))
	default:
		return fmt.Sprintf("%v. Run the same `commprof sweep --out %s ...` command again to write it anew (it keeps the finished runs). Its %d runs are listed with it.",
			err, sd.show, len(sd.runs))
	}
}

// sweepInfo is a sweep as the index lists it: one row with its
// configurations, and its runs.
func (s *server) sweepInfo(ctx context.Context, sd *sweepDir, runs []listed) listed {
	l := listed{info: report.RunEntry{Name: sd.name, Kind: report.KindSweep, Title: sd.name, Report: runURL(sd.name)}}
	ri := &l.info
	// A sweep started when its first run did.
	running := 0
	for _, r := range newestFirst(runs) {
		ri.Runs = append(ri.Runs, r.info)
		if r.info.Running() {
			running++
		}
		if l.sortTime.IsZero() || r.sortTime.Before(l.sortTime) {
			l.sortTime, ri.Start = r.sortTime, r.info.Start
		}
	}
	if l.sortTime.IsZero() && sd.file != nil {
		l.sortTime = sd.file.ModTime()
	}
	sw, err := s.readSweep(ctx, sd)
	if err != nil {
		ri.Error = sweepProblem(sd, err, running)
	} else {
		ri.Stats = runURL(sd.name) + rundir.SweepFile
		ri.Status = trace.StatusComplete
		ri.Configs = len(sw.Configs)
		ri.Range = report.NewSweepRange(sw)
	}
	if running > 0 {
		ri.Status = trace.StatusRunning
	}
	return l
}

// serveSweep serves a sweep's page: its sweep.json drawn as
// `commprof sweep` draws sweep.html.
func (s *server) serveSweep(w http.ResponseWriter, r *http.Request, sd *sweepDir) {
	sw, err := s.readSweep(r.Context(), sd)
	if err != nil {
		if isContextErr(err) {
			return
		}
		running := 0
		var links []report.Link
		for _, id := range sd.runs {
			if run, err := s.lookup(id); err == nil {
				_, name, _ := splitID(id)
				links = append(links, report.Link{Text: name, URL: "../../" + runURL(id)})
				if m, err := trace.ReadManifest(run.dir); err == nil && rundir.Status(run.dir, m) == trace.StatusRunning {
					running++
				}
			}
		}
		code := http.StatusInternalServerError
		if errors.Is(err, errNoSweepFile) {
			code = http.StatusNotFound
		}
		s.failPage(w, r, report.Problem{Code: code, Title: "The sweep " + sd.name + " cannot be shown", Message: sweepProblem(sd, err, running),
			Home: s.home(r), Links: links, LinksTitle: "Its runs"})
		return
	}
	etag := `"sweep-` + s.boot + "-" + sd.key() + `"`
	if notModified(w, r, etag) {
		return
	}
	b, err := s.pages.get(r.Context(), "sweep\x00"+sd.name+"\x00"+sd.key(), func(ctx context.Context) ([]byte, error) {
		var buf bytes.Buffer
		if err := report.WriteSweepHTML(&buf, sw); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	})
	if err != nil {
		s.failErr(w, r, "drawing the sweep "+sd.name, err)
		return
	}
	serveBytes(w, r, "text/html; charset=utf-8", etag, sd.file.ModTime(), b)
}

// handleSweepJSON serves a sweep's sweep.json, once checked.
func (s *server) handleSweepJSON(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	sd, err := s.lookupSweep(name)
	if err != nil {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("There is no sweep %q here: a sweep is a directory directly under the runs directory holding %s and its runs.", name, rundir.SweepFile))
		return
	}
	sw, err := s.readSweep(r.Context(), sd)
	if err != nil {
		if isContextErr(err) {
			return
		}
		code := http.StatusInternalServerError
		if errors.Is(err, errNoSweepFile) {
			code = http.StatusNotFound
		}
		s.fail(w, r, code, sweepProblem(sd, err, 0))
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	if err := enc.Encode(sw); err != nil {
		s.failErr(w, r, "encoding "+rundir.SweepFile, err)
		return
	}
	serveBytes(w, r, "application/json", `"sweepjson-`+s.boot+"-"+sd.key()+`"`, sd.file.ModTime(), buf.Bytes())
}

// summarySize is about the memory a summary holds: its JSON's length.
func summarySize(sum *analyze.Summary) int64 {
	b, err := json.Marshal(sum)
	if err != nil {
		return 1 << 20
	}
	return int64(len(b))
}
