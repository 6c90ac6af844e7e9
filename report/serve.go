package report

import (
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"math"
	"net/http"
	"strconv"
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

//go:embed assets/index.js
var indexJS string

var servePages = template.Must(template.New("serve").Funcs(template.FuncMap{
	// choicesFor is the diff form's select of runs, with one selected.
	"choicesFor": func(groups []choiceGroup, selected string) any {
		return struct {
			Groups   []choiceGroup
			Selected string
		}{groups, selected}
	},
}).ParseFS(templateFiles, "assets/index.html", "assets/live.html", "assets/error.html", "assets/style.html"))

// Kinds of the entries of the list of runs.
const (
	KindRun   = "run"
	KindSweep = "sweep" // a sweep's directory: its sweep.json and its runs
)

// RunInfo is one entry in the list of runs and in serve's /api/runs: a
// run, or a sweep with its runs, and their key numbers. Times are in ns,
// sizes in bytes, bandwidths in GB/s.
type RunInfo struct {
	Name   string `json:"name"`   // its path under the runs directory, as in its URLs: NAME, or SWEEP/NAME for a sweep's run
	Kind   string `json:"kind"`   // KindRun or KindSweep
	Title  string `json:"title"`  // the manifest's name of the run
	Status string `json:"status"` // the manifest's, or "abandoned" for a run whose recorder is gone
	// Sweep is the name of the sweep a run belongs to, if any.
	Sweep     string `json:"sweep,omitempty"`
	WorldSize int    `json:"world_size"`
	Events    int64  `json:"events"`
	Start     string `json:"start,omitempty"` // RFC 3339
	// The configuration: the batch size per rank, the global batch (per
	// step, over every rank), the learning-rate rule and its warm-up
	// epochs, from the manifest's configuration.
	BatchSize     int     `json:"batch_size,omitempty"`
	GlobalBatch   int     `json:"global_batch,omitempty"`
	LRScaling     string  `json:"lr_scaling,omitempty"`
	WarmupEpochs  string  `json:"warmup_epochs,omitempty"`
	SamplesPerSec float64 `json:"samples_per_sec"` // global samples per second of step time
	Steps         int     `json:"steps"`
	StepNS        float64 `json:"step_ns"`
	CommFraction  float64 `json:"comm_fraction"`
	// CommUnknown says the run's source cannot give its communication
	// share (an NCCL log without durations): CommFraction is then 0 and
	// the list shows "unknown", as the run's report does.
	CommUnknown bool     `json:"comm_unknown,omitempty"`
	BusBWGBps   float64  `json:"busbw_gbps"`
	BusBWOp     string   `json:"busbw_op,omitempty"`
	Accuracy    *float64 `json:"accuracy,omitempty"` // final test accuracy, 0 to 1
	DiskBytes   int64    `json:"disk_bytes"`
	Problems    int      `json:"problems"`
	Error       string   `json:"error,omitempty"`   // why the run (or the sweep) cannot be shown
	Pending     bool     `json:"pending,omitempty"` // the server was too busy to read it yet: reload
	Report      string   `json:"report"`            // URL of its page (report, live page or sweep page), relative to the server's root
	Stats       string   `json:"stats,omitempty"`   // URL of its JSON: the summary, or the sweep's sweep.json
	// A sweep's: its configurations' count and span, and its runs.
	Configs int         `json:"configs,omitempty"`
	Range   *SweepRange `json:"range,omitempty"`
	Runs    []RunInfo   `json:"runs,omitempty"`
}

// SweepRange is the span of a sweep's configurations in the columns of
// the list of runs: [lowest, highest] of each, from its sweep.json (the
// samples/s and accuracies are the configurations' means over repeats;
// nil when no configuration has one).
type SweepRange struct {
	BatchSize     [2]int      `json:"batch_size"`
	GlobalBatch   [2]int      `json:"global_batch"`
	Ranks         [2]int      `json:"ranks"`
	LRRules       []string    `json:"lr_rules"`
	SamplesPerSec *[2]float64 `json:"samples_per_sec,omitempty"`
	Accuracy      *[2]float64 `json:"accuracy,omitempty"`
}

// Running reports whether the run is still being recorded.
func (ri RunInfo) Running() bool { return ri.Status == trace.StatusRunning }

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

// pageBase is what every page's template needs.
type pageBase struct {
	CSS template.CSS
}

func base() pageBase { return pageBase{CSS: template.CSS(reportCSSText)} }

// Problem is what the error page of a request says: the HTTP status,
// a title (default: the status), the message as text, a link to home
// (the list of runs) and, optionally, links onwards (the runs of a sweep
// whose own page cannot be drawn).
type Problem struct {
	Code       int
	Title      string
	Message    string
	Home       string
	LinksTitle string
	Links      []Link
}

// Link is a link on a page: its text and URL.
type Link struct {
	Text, URL string
}

type errorPage struct {
	pageBase
	Problem
	Status      string
	CustomTitle bool
}

// WriteError writes the page of a request that failed with the HTTP
// status code: msg, shown as text, and a link to home, the list of runs.
func WriteError(w io.Writer, code int, msg, home string) error {
	return WriteProblem(w, Problem{Code: code, Message: msg, Home: home})
}

// WriteProblem writes the page of a request that failed as p says.
func WriteProblem(w io.Writer, p Problem) error {
	page := errorPage{pageBase: base(), Problem: p, Status: http.StatusText(p.Code), CustomTitle: p.Title != ""}
	if !page.CustomTitle {
		page.Title = fmt.Sprintf("%d %s", p.Code, page.Status)
	}
	return servePages.ExecuteTemplate(w, "error.html", page)
}

// runRow is a row of the index, its numbers formatted. Each cell's
// sort key (V…) is a number, or "" for none (sorted last).
type runRow struct {
	RunInfo
	Child bool // a run of a sweep, under its sweep's row
	Open  bool // a sweep's run shown from the start
	Pick  bool // can be picked for a diff
	ShortName,
	Started, EventsText, StepText, CommText, BusBWText, AccText, DiskText,
	BatchText, GlobalText, RanksText, RuleText, SPSText string
	VStarted, VEvents, VStep, VComm, VBusBW, VAcc,
	VBatch, VGlobal, VRanks, VSPS, VRule string
}

// runGroup is a top-level entry of the index and, for a sweep, its runs:
// one tbody, sorted as one.
type runGroup struct {
	Row  runRow
	Runs []runRow
	Open bool // show its runs from the start (its own page cannot be drawn)
}

// choiceGroup is the runs of one sweep in the diff form (Sweep "" for
// the runs directly under the runs directory).
type choiceGroup struct {
	Sweep string
	Runs  []choice
}

type choice struct{ ID, Text string }

type indexPage struct {
	pageBase
	Dir                string
	Groups             []runGroup
	Runs, Sweeps       int
	Running            int
	Choices            []choiceGroup // the runs that can be compared
	NChoices           int
	DefaultA, DefaultB string
	Script             template.JS
}

const dash = "—"

// WriteIndex writes the list of the runs and sweeps in dir (as the user
// named it), in the order given (serve lists the newest first), sortable
// by every column, with a form that compares any two runs.
func WriteIndex(w io.Writer, dir string, runs []RunInfo) error {
	return servePages.ExecuteTemplate(w, "index.html", newIndexPage(dir, runs))
}

func newIndexPage(dir string, runs []RunInfo) indexPage {
	p := indexPage{pageBase: base(), Dir: dir, Script: template.JS(indexJS)}
	top := choiceGroup{}
	var sweeps []choiceGroup
	var order []string // the runs that can be compared, as listed
	for _, ri := range runs {
		g := runGroup{Row: newRunRow(ri, false)}
		if ri.Kind == KindSweep {
			p.Sweeps++
			g.Open = ri.Error != ""
			cg := choiceGroup{Sweep: ri.Name}
			for _, c := range ri.Runs {
				row := newRunRow(c, true)
				row.Open = g.Open
				g.Runs = append(g.Runs, row)
				p.Runs++
				if c.Running() {
					p.Running++
				}
				if row.Pick {
					cg.Runs = append(cg.Runs, choice{ID: c.Name, Text: row.ShortName})
					order = append(order, c.Name)
				}
			}
			if len(cg.Runs) > 0 {
				sweeps = append(sweeps, cg)
			}
		} else {
			p.Runs++
			if ri.Running() {
				p.Running++
			}
			if g.Row.Pick {
				top.Runs = append(top.Runs, choice{ID: ri.Name, Text: ri.Name})
				order = append(order, ri.Name)
			}
		}
		p.Groups = append(p.Groups, g)
	}
	if len(top.Runs) > 0 {
		p.Choices = append(p.Choices, top)
	}
	p.Choices = append(p.Choices, sweeps...)
	p.NChoices = len(order)
	// B, the newest complete run directly under the runs directory,
	// against A, the one before it; else the first two runs listed.
	var done []string
	for _, ri := range runs {
		if ri.Kind != KindSweep && ri.Status == trace.StatusComplete && ri.Error == "" && ri.Events > 0 {
			done = append(done, ri.Name)
		}
	}
	if len(done) < 2 {
		done = order
	}
	if len(done) >= 2 {
		p.DefaultB, p.DefaultA = done[0], done[1]
	}
	return p
}

// num is a sort key.
func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func spanText(r [2]int) string {
	if r[0] == r[1] {
		return strconv.Itoa(r[0])
	}
	return fmt.Sprintf("%d–%d", r[0], r[1])
}

func newRunRow(ri RunInfo, child bool) runRow {
	row := runRow{RunInfo: ri, Child: child, ShortName: ri.Name, Started: dash, StepText: dash, CommText: dash, BusBWText: dash, AccText: dash,
		EventsText: dash, DiskText: units.Bytes(ri.DiskBytes), BatchText: dash, GlobalText: dash, RanksText: dash, RuleText: dash, SPSText: dash}
	if _, name, ok := strings.Cut(ri.Name, "/"); ok {
		row.ShortName = name
	}
	if t, err := time.Parse(time.RFC3339, ri.Start); err == nil {
		row.Started, row.VStarted = t.Local().Format("2006-01-02 15:04"), num(float64(t.Unix()))
	}
	if ri.Kind == KindSweep {
		if rg := ri.Range; rg != nil {
			row.BatchText, row.VBatch = spanText(rg.BatchSize), num(float64(rg.BatchSize[0]))
			row.GlobalText, row.VGlobal = spanText(rg.GlobalBatch), num(float64(rg.GlobalBatch[0]))
			row.RanksText, row.VRanks = spanText(rg.Ranks), num(float64(rg.Ranks[0]))
			if len(rg.LRRules) > 0 {
				row.RuleText = strings.Join(rg.LRRules, "; ")
				row.VRule = row.RuleText
			}
			if v := rg.SamplesPerSec; v != nil {
				row.SPSText, row.VSPS = fmt.Sprintf("%.0f–%.0f", v[0], v[1]), num(v[1])
				if math.Round(v[0]) == math.Round(v[1]) {
					row.SPSText = fmt.Sprintf("%.0f", v[1])
				}
			}
			if v := rg.Accuracy; v != nil {
				row.AccText, row.VAcc = fmt.Sprintf("%.2f–%.2f%%", 100*v[0], 100*v[1]), num(v[1])
				if math.Round(1e4*v[0]) == math.Round(1e4*v[1]) {
					row.AccText = fmt.Sprintf("%.2f%%", 100*v[1])
				}
			}
		}
		return row
	}
	row.Pick = ri.Error == "" && ri.Events > 0
	row.EventsText, row.VEvents = fmt.Sprint(ri.Events), num(float64(ri.Events))
	if ri.WorldSize > 0 {
		row.RanksText, row.VRanks = strconv.Itoa(ri.WorldSize), num(float64(ri.WorldSize))
	}
	if ri.BatchSize > 0 {
		row.BatchText, row.VBatch = strconv.Itoa(ri.BatchSize), num(float64(ri.BatchSize))
	}
	if ri.GlobalBatch > 0 {
		row.GlobalText, row.VGlobal = strconv.Itoa(ri.GlobalBatch), num(float64(ri.GlobalBatch))
	}
	if ri.LRScaling != "" {
		row.RuleText = ri.LRScaling
		if ri.WarmupEpochs != "" {
			row.RuleText += ", warm-up " + ri.WarmupEpochs
		}
		row.VRule = row.RuleText
	}
	if ri.SamplesPerSec > 0 {
		row.SPSText, row.VSPS = fmt.Sprintf("%.0f", ri.SamplesPerSec), num(ri.SamplesPerSec)
	}
	if ri.Steps > 0 {
		row.StepText, row.VStep = units.Duration(ri.StepNS), num(ri.StepNS)
	}
	switch {
	case ri.CommUnknown:
		row.CommText = "unknown"
	case ri.Events > 0:
		row.CommText, row.VComm = fmt.Sprintf("%.0f%%", 100*ri.CommFraction), num(ri.CommFraction)
	}
	if ri.BusBWGBps > 0 {
		row.BusBWText, row.VBusBW = units.GBps(ri.BusBWGBps), num(ri.BusBWGBps)
	}
	if ri.Accuracy != nil {
		row.AccText, row.VAcc = fmt.Sprintf("%.2f%%", 100**ri.Accuracy), num(*ri.Accuracy)
	}
	return row
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
