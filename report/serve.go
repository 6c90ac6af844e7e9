package report

import (
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/trace"
)

// The pages of `commprof serve` besides the reports: the list of runs,
// the live page of a run being recorded, and the error page. Their data
// (RunInfo, Live) is also what the server answers as JSON.

//go:embed assets/index.html assets/live.html assets/error.html assets/style.html
var templateFiles embed.FS

//go:embed assets/live.js
var liveJS string

var servePages = template.Must(template.ParseFS(templateFiles, "assets/index.html", "assets/live.html", "assets/error.html", "assets/style.html"))

// RunInfo is one run in the list of runs and in serve's /api/runs: its
// key numbers. Times are in ns, sizes in bytes, bandwidths in GB/s.
type RunInfo struct {
	Name         string   `json:"name"`  // the directory's name, as in the run's URLs
	Title        string   `json:"title"` // the manifest's name of the run
	Status       string   `json:"status"`
	WorldSize    int      `json:"world_size"`
	Events       int64    `json:"events"`
	Start        string   `json:"start,omitempty"` // RFC 3339
	Steps        int      `json:"steps"`
	StepNS       float64  `json:"step_ns"`
	CommFraction float64  `json:"comm_fraction"`
	BusBWGBps    float64  `json:"busbw_gbps"`
	BusBWOp      string   `json:"busbw_op,omitempty"`
	Accuracy     *float64 `json:"accuracy,omitempty"` // final test accuracy, 0 to 1
	DiskBytes    int64    `json:"disk_bytes"`
	Problems     int      `json:"problems"`
	Error        string   `json:"error,omitempty"` // why the run could not be summarized
	Report       string   `json:"report"`          // URL of its report (or live page), relative to the server's root
	Stats        string   `json:"stats"`           // URL of its summary JSON
}

// Running reports whether the run is still being recorded.
func (ri RunInfo) Running() bool { return ri.Status == trace.StatusRunning }

// Live is the progress of a run, as serve's /runs/NAME/live.json answers
// it and the live page shows it. Times are in ns, sizes in bytes.
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

// pageBase is what every page's template needs.
type pageBase struct {
	CSS template.CSS
}

func base() pageBase { return pageBase{CSS: template.CSS(reportCSSText)} }

type errorPage struct {
	pageBase
	Code          int
	Status        string
	Message, Home string
}

// WriteError writes the page of a request that failed with the HTTP
// status code: msg, shown as text, and a link to home, the list of runs.
func WriteError(w io.Writer, code int, msg, home string) error {
	return servePages.ExecuteTemplate(w, "error.html", errorPage{pageBase: base(), Code: code, Status: http.StatusText(code), Message: msg, Home: home})
}

// runRow is a run in the index, its numbers formatted.
type runRow struct {
	RunInfo
	Started, EventsText, StepText, CommText, BusBWText, AccText, DiskText string
}

type indexPage struct {
	pageBase
	Dir                string
	Runs               []runRow
	Running            int
	Choices            []RunInfo // the runs that can be compared
	DefaultA, DefaultB string
}

const dash = "—"

// WriteIndex writes the list of the runs in dir (as the user named it),
// in the order given (serve lists the newest first), with a form that
// compares any two.
func WriteIndex(w io.Writer, dir string, runs []RunInfo) error {
	return servePages.ExecuteTemplate(w, "index.html", newIndexPage(dir, runs))
}

func newIndexPage(dir string, runs []RunInfo) indexPage {
	p := indexPage{pageBase: base(), Dir: dir}
	for _, ri := range runs {
		row := runRow{RunInfo: ri, Started: dash, StepText: dash, CommText: dash, BusBWText: dash, AccText: dash,
			EventsText: fmt.Sprint(ri.Events), DiskText: units.Bytes(ri.DiskBytes)}
		if t, err := time.Parse(time.RFC3339, ri.Start); err == nil {
			row.Started = t.Local().Format("2006-01-02 15:04")
		}
		if ri.Steps > 0 {
			row.StepText = units.Duration(ri.StepNS)
		}
		if ri.Events > 0 {
			row.CommText = fmt.Sprintf("%.0f%%", 100*ri.CommFraction)
		}
		if ri.BusBWGBps > 0 {
			row.BusBWText = units.GBps(ri.BusBWGBps)
		}
		if ri.Accuracy != nil {
			row.AccText = fmt.Sprintf("%.2f%%", 100**ri.Accuracy)
		}
		if ri.Running() {
			p.Running++
		}
		if ri.Error == "" && ri.Events > 0 {
			p.Choices = append(p.Choices, ri)
		}
		p.Runs = append(p.Runs, row)
	}
	// B, the newest finished run, against A, the one before it.
	var done []string
	for _, c := range p.Choices {
		if !c.Running() {
			done = append(done, c.Name)
		}
	}
	if len(done) < 2 {
		done = done[:0]
		for _, c := range p.Choices {
			done = append(done, c.Name)
		}
	}
	if len(done) >= 2 {
		p.DefaultB, p.DefaultA = done[0], done[1]
	}
	return p
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
	p := &livePage{pageBase: base(), Live: l, Data: template.JS(b), Format: template.JS(formatJS), Script: template.JS(liveJS), Home: "../../",
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
