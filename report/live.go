package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/trace"
)

// The live page of a run being recorded, and its model, built from what
// the server read: the server reads the files, report says what they
// mean for a person.

// Live is the progress of a run, as serve's /runs/NAME/live.json answers
// it and the live page shows it. Times are in ns, sizes in bytes.
type Live struct {
	Name      string `json:"name"`  // the run's id: its path under the runs directory (NAME or SWEEP/NAME)
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

// LiveSource is what the server read of a run for its live page.
type LiveSource struct {
	Name string    // the run's id, as in its URLs
	Now  time.Time // when it was read
	// Manifest is the run's run.json (nil when it has none yet), Status
	// its status as read (rundir.Status: abandoned when its recorder is
	// gone), LastWrite when its files were last written.
	Manifest  *trace.Manifest
	Status    string
	LastWrite time.Time
	// Streams are the rank streams on disk, nil when none could be listed;
	// Summary is the summary of what they hold, nil when none could be
	// made; Problem says why the run could not be read, "" when it could.
	Streams []trace.StreamFile
	Summary *analyze.Summary
	Problem string
}

// abandonedError is what the live page says of a run whose recorder
// stopped without finishing run.json.
const abandonedError = "Its recorder is gone (killed, or its machine stopped) before it could finish run.json, which still says running; the events it wrote are kept."

// NewLive is the live page's model of a run being recorded, or just
// recorded.
func NewLive(src LiveSource) *Live {
	l := &Live{Name: src.Name, Title: src.Name, Report: "./", Updated: src.Now.UTC().Format(time.RFC3339), Ranks: []LiveRank{}, Findings: []string{},
		Problem: src.Problem}
	if m := src.Manifest; m != nil {
		l.Title, l.Status, l.WorldSize, l.Error = m.Name, src.Status, m.WorldSize, m.Error
		if l.Status == trace.StatusAbandoned && l.Error == "" {
			l.Error = abandonedError
		}
		if l.Title == "" {
			l.Title = src.Name
		}
		if !m.Start.IsZero() {
			l.Start = m.Start.Format(time.RFC3339)
			end := src.Now // still running: until now
			switch {
			case l.Status == trace.StatusAbandoned:
				end = src.LastWrite
			case l.Status != trace.StatusRunning && !m.End.IsZero():
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
	if m := src.Manifest; m != nil {
		for _, e := range m.Ranks {
			rank(e.Rank).Host = e.Host
		}
	}
	for _, st := range src.Streams {
		rank(st.Rank).Bytes = st.Bytes
		l.DiskBytes += st.Bytes
	}
	if sum := src.Summary; sum != nil {
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
	}
	for _, lr := range byRank {
		l.Ranks = append(l.Ranks, *lr)
	}
	sort.Slice(l.Ranks, func(i, j int) bool { return l.Ranks[i].Rank < l.Ranks[j].Rank })
	return l
}

// liveRank is a rank on the live page, its numbers formatted.
type liveRank struct {
	Rank          int
	Host          string
	Events, Bytes string
	Pct           int
}

type livePage struct {
	pageBase
	Live                                     *Live
	Data                                     template.JS
	Format, Script                           template.JS
	Home                                     string
	IntervalMS                               int64
	IntervalText                             string
	Subtitle, Elapsed, Started, Events, Disk string
	Updated                                  string
	Writing                                  int
	Ranks                                    []liveRank
}

// WriteLive writes the live page of a run being recorded, served at
// /runs/NAME/: it shows l and fetches live.json beside it every interval
// until the run ends, then links to the report.
func WriteLive(w io.Writer, l *Live, interval time.Duration) error {
	p, err := newLivePage(l, interval)
	if err != nil {
		return err
	}
	return servePages.ExecuteTemplate(w, "live.html", p)
}

func newLivePage(l *Live, interval time.Duration) (*livePage, error) {
	// encoding/json escapes <, > and &, so nothing in the data can close
	// its <script> element.
	b, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	// The page is /runs/NAME/ or /runs/SWEEP/NAME/.
	home := strings.Repeat("../", 2+strings.Count(l.Name, "/"))
	p := &livePage{pageBase: base(), Live: l, Data: template.JS(b), Format: template.JS(formatJS), Script: template.JS(liveJS), Home: home,
		IntervalMS: interval.Milliseconds(), IntervalText: interval.String(),
		Elapsed: time.Duration(l.ElapsedNS).Round(time.Second).String(), Started: "start unknown",
		Events: fmt.Sprint(l.Events), Disk: units.Bytes(l.DiskBytes), Updated: l.Updated}
	var sub []string
	if l.Title != l.Name {
		sub = append(sub, l.Title)
	}
	sub = append(sub, fmt.Sprintf("%d ranks", l.WorldSize), "being recorded")
	p.Subtitle = strings.Join(sub, " · ")
	if l.Start != "" {
		p.Started = "started " + l.Start
	}
	most := int64(1)
	for _, r := range l.Ranks {
		most = max(most, r.Events)
		if r.Bytes > 0 {
			p.Writing++
		}
	}
	for _, r := range l.Ranks {
		p.Ranks = append(p.Ranks, liveRank{Rank: r.Rank, Host: r.Host, Events: fmt.Sprint(r.Events), Bytes: units.Bytes(r.Bytes),
			Pct: int(100 * r.Events / most)})
	}
	return p, nil
}
