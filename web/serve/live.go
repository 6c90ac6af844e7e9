package serve

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"sort"
	"time"

	"github.com/commprof/commprof/trace"
)

// Live is the progress of a run, as /runs/NAME/live.json serves it and the
// live page shows it. Times are in ns, sizes in bytes.
type Live struct {
	Name      string `json:"name"`  // the directory's name
	Title     string `json:"title"` // the manifest's name
	Status    string `json:"status"`
	Running   bool   `json:"running"`
	Start     string `json:"start,omitempty"` // RFC 3339
	ElapsedNS int64  `json:"elapsed_ns"`      // since the start: until now while running, else until the end
	SpanNS    int64  `json:"span_ns"`         // from the first recorded event to the last
	WorldSize int    `json:"world_size"`
	Events    int64  `json:"events"`
	DiskBytes int64  `json:"disk_bytes"`
	// Ranks are the ranks with a stream (or in the manifest), by rank.
	Ranks    []LiveRank `json:"ranks"`
	Findings []string   `json:"findings"`
	Error    string     `json:"error,omitempty"`   // the manifest's error, once the run failed
	Problem  string     `json:"problem,omitempty"` // why the events could not be read
	Report   string     `json:"report"`            // URL of the report, relative to the live page
	Updated  string     `json:"updated"`           // the server's time of this reading, RFC 3339
}

// LiveRank is one rank's progress.
type LiveRank struct {
	Rank   int    `json:"rank"`
	Host   string `json:"host"`
	Events int64  `json:"events"`
	Bytes  int64  `json:"bytes"` // its stream's size on disk
}

// live reads a run's progress: its manifest, its streams' sizes and the
// summary of every batch written so far.
func (s *server) live(ctx context.Context, r *run) (*Live, error) {
	now := s.now()
	l := &Live{Name: r.name, Title: r.name, Report: "./", Updated: now.UTC().Format(time.RFC3339), Ranks: []LiveRank{}, Findings: []string{}}
	m, err := trace.ReadManifest(r.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		l.Problem = err.Error()
	}
	if m != nil {
		l.Title, l.Status, l.WorldSize, l.Error = m.Name, m.Status, m.WorldSize, m.Error
		if l.Title == "" {
			l.Title = r.name
		}
		if !m.Start.IsZero() {
			l.Start = m.Start.Format(time.RFC3339)
			end := now
			if m.Status != trace.StatusRunning && !m.End.IsZero() {
				end = m.End
			}
			l.ElapsedNS = max(0, end.Sub(m.Start).Nanoseconds())
		}
	}
	l.Running = l.Status == trace.StatusRunning
	byRank := map[int]*LiveRank{}
	rank := func(n int) *LiveRank {
		lr, ok := byRank[n]
		if !ok {
			lr = &LiveRank{Rank: n}
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
	run := s.lookupOrFail(w, r, r.PathValue("name"))
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
	p, err := s.livePage(l)
	if err != nil {
		s.failErr(w, r, "drawing the live page of "+run.name, err)
		return
	}
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, "live.html", p); err != nil {
		s.failErr(w, r, "drawing the live page of "+run.name, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}
