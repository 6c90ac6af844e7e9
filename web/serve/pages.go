package serve

import (
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/web"
)

//go:embed assets/*.html
var templateFiles embed.FS

//go:embed assets/live.js
var liveJS string

var pages = template.Must(template.ParseFS(templateFiles, "assets/*.html"))

// pageBase is what every page's template needs.
type pageBase struct {
	CSS template.CSS
}

func (s *server) base() pageBase { return pageBase{CSS: template.CSS(web.ReportCSS())} }

type errorPage struct {
	pageBase
	Code          int
	Status        string
	Message, Home string
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

func (s *server) indexPage(runs []RunInfo) indexPage {
	p := indexPage{pageBase: s.base(), Dir: s.cfg.RunsDir}
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
	Script                                   template.JS
	Home                                     string
	IntervalMS                               int64
	IntervalText                             string
	Subtitle, Elapsed, Started, Events, Disk string
	Updated                                  string
	Writing                                  int
	Ranks                                    []liveRank
}

func (s *server) livePage(l *Live) (*livePage, error) {
	// encoding/json escapes <, > and &, so nothing in the data can close
	// its <script> element.
	b, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	p := &livePage{pageBase: s.base(), Live: l, Data: template.JS(b), Script: template.JS(liveJS), Home: "../../",
		IntervalMS: s.cfg.LiveInterval.Milliseconds(), IntervalText: s.cfg.LiveInterval.String(),
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
