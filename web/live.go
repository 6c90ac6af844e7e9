package web

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"sort"
	"time"

	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/report"
	"github.com/commprof/commprof/trace"
)

// live reads a run's progress: its manifest, its streams' sizes and the
// summary of every batch written so far.
func (s *server) live(ctx context.Context, r *run) (*report.Live, error) {
	now := s.now()
	l := &report.Live{Name: r.name, Title: r.name, Report: "./", Updated: now.UTC().Format(time.RFC3339), Ranks: []report.LiveRank{}, Findings: []string{}}
	m, err := trace.ReadManifest(r.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		l.Problem = err.Error()
	}
	if m != nil {
		l.Title, l.Status, l.WorldSize, l.Error = m.Name, rundir.Status(r.dir, m), m.WorldSize, m.Error
		if l.Status == trace.StatusAbandoned && l.Error == "" {
			l.Error = "Its recorder is gone (killed, or its machine stopped) before it could finish run.json, which still says running; the events it wrote are kept."
		}
		if l.Title == "" {
			l.Title = r.name
		}
		if !m.Start.IsZero() {
			l.Start = m.Start.Format(time.RFC3339)
			end := now
			switch {
			case l.Status == trace.StatusAbandoned:
				end = r.fp.modTime // its last write
			case l.Status != trace.StatusRunning && !m.End.IsZero():
				end = m.End
			}
			l.ElapsedNS = max(0, end.Sub(m.Start).Nanoseconds())
		}
	}
	l.Running = l.Status == trace.StatusRunning
	byRank := map[int]*report.LiveRank{}
	rank := func(n int) *report.LiveRank {
		lr, ok := byRank[n]
		if !ok {
			lr = &report.LiveRank{Rank: n}
			byRank[n] = lr
		}
		return lr
	}
	if m != nil {
		for _, e := range m.Ranks {
			rank(e.Rank).Host = e.Host
		}
	}
	rf, err := trace.OpenRun(r.dir)
	switch {
	case err == nil:
		for _, st := range rf.Streams {
			rank(st.Rank).Bytes = st.Bytes
			l.DiskBytes += st.Bytes
		}
	case errors.Is(err, trace.ErrNotTrace) && l.Running:
		// Started, no stream yet.
	default:
		l.Problem = err.Error()
	}
	if err == nil {
		sum, err := s.summary(ctx, r)
		switch {
		case err == nil:
			l.Events, l.SpanNS = sum.Run.Events, sum.Run.SpanNS
			l.Findings = append(l.Findings, sum.Findings...)
			for _, rs := range sum.Ranks {
				lr := rank(rs.Rank)
				lr.Events = rs.Events
				if rs.Host != "" {
					lr.Host = rs.Host
				}
			}
			if l.WorldSize == 0 {
				l.WorldSize = sum.Run.WorldSize
			}
		case isContextErr(err):
			return nil, err
		default:
			l.Problem = err.Error()
		}
	}
	for _, lr := range byRank {
		l.Ranks = append(l.Ranks, *lr)
	}
	sort.Slice(l.Ranks, func(i, j int) bool { return l.Ranks[i].Rank < l.Ranks[j].Rank })
	return l, nil
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
