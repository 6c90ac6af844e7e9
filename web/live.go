package web

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/http"

	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/report"
	"github.com/commprof/commprof/trace"
)

// live reads a run's progress: its manifest, its streams' sizes and the
// summary of every batch written so far; report.NewLive says what they
// mean.
func (s *server) live(ctx context.Context, r *run) (*report.Live, error) {
	src := report.LiveSource{Name: r.name, Now: s.now(), LastWrite: r.fp.modTime}
	m, err := trace.ReadManifest(r.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		src.Problem = err.Error()
	}
	if m != nil {
		src.Manifest, src.Status = m, rundir.Status(r.dir, m)
	}
	rf, err := load.Files(r.dir)
	switch {
	case err == nil:
		src.Streams = rf.Streams
	case errors.Is(err, trace.ErrNotTrace) && src.Status == trace.StatusRunning:
		// Started, no stream yet.
	default:
		src.Problem = err.Error()
	}
	if err == nil {
		sum, err := s.summary(ctx, r)
		switch {
		case err == nil:
			src.Summary = sum
		case isContextErr(err):
			return nil, err
		default:
			src.Problem = err.Error()
		}
	}
	return report.NewLive(src), nil
}

func (s *server) handleLive(w http.ResponseWriter, r *http.Request) {
	run := s.lookupOrFail(w, r)
	if run == nil {
		return
	}
	l, err := s.live(r.Context(), run)
	if err != nil {
		s.failErr(w, r, "reading the progress of "+run.name, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, l)
}

func (s *server) serveLivePage(w http.ResponseWriter, r *http.Request, run *run) {
	l, err := s.live(r.Context(), run)
	if err != nil {
		s.failErr(w, r, "reading the progress of "+run.name, err)
		return
	}
	var buf bytes.Buffer
	if err := report.WriteLive(&buf, l, s.cfg.LiveInterval); err != nil {
		s.failErr(w, r, "drawing the live page of "+run.name, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}
