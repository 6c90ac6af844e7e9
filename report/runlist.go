package report

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/trace"
)

// The list of runs serve shows at its root and answers as /api/runs.

// Kinds of the entries of the list of runs.
const (
	KindRun   = "run"
	KindSweep = "sweep" // a sweep's directory: its sweep.json and its runs
)

// RunEntry is one entry in the list of runs and in serve's /api/runs: a
// run, or a sweep with its runs, and their key numbers. Times are in ns,
// sizes in bytes, bandwidths in GB/s.
type RunEntry struct {
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
	Runs    []RunEntry  `json:"runs,omitempty"`
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
func (ri RunEntry) Running() bool { return ri.Status == trace.StatusRunning }

// runRow is a row of the index, its numbers formatted. Each cell's
// sort key (V…) is a number, or "" for none (sorted last).
type runRow struct {
	RunEntry
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
func WriteIndex(w io.Writer, dir string, runs []RunEntry) error {
	return servePages.ExecuteTemplate(w, "index.html", newIndexPage(dir, runs))
}

func newIndexPage(dir string, runs []RunEntry) indexPage {
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

func newRunRow(ri RunEntry, child bool) runRow {
	row := runRow{RunEntry: ri, Child: child, ShortName: ri.Name, Started: dash, StepText: dash, CommText: dash, BusBWText: dash, AccText: dash,
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
				row.AccText, row.VAcc = strings.TrimSuffix(units.Percent(v[0], 2), "%")+"–"+units.Percent(v[1], 2), num(v[1])
				if math.Round(1e4*v[0]) == math.Round(1e4*v[1]) {
					row.AccText = units.Percent(v[1], 2)
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
		row.CommText, row.VComm = units.Percent(ri.CommFraction, 0), num(ri.CommFraction)
	}
	if ri.BusBWGBps > 0 {
		row.BusBWText, row.VBusBW = units.GBps(ri.BusBWGBps), num(ri.BusBWGBps)
	}
	if ri.Accuracy != nil {
		row.AccText, row.VAcc = units.Percent(*ri.Accuracy, 2), num(*ri.Accuracy)
	}
	return row
}

// SetConfig sets the list's configuration columns of a run from its
// configuration and final metrics (the manifest's, or its summary's).
func (ri *RunEntry) SetConfig(config map[string]string, metrics trace.Metrics) {
	c := trace.ParseConfig(config)
	if c.BatchSize > 0 {
		ri.BatchSize = c.BatchSize
		if ri.WorldSize > 0 {
			ri.GlobalBatch = c.BatchSize * ri.WorldSize
		}
	}
	ri.LRScaling = c.LRScaling
	if w := c.WarmupEpochs; w != "" && w != "0" {
		ri.WarmupEpochs = w
	}
	if acc, ok := metrics[trace.MetricTestAccuracy]; ok && !math.IsNaN(acc) && !math.IsInf(acc, 0) {
		ri.Accuracy = &acc
	}
}

// NewSweepRange is what the list of runs shows of a sweep's
// configurations: the span of each of its columns.
func NewSweepRange(sw *analyze.Sweep) *SweepRange {
	rg := &SweepRange{}
	first := true
	span := func(r *[2]int, v int) {
		if first || v < r[0] {
			r[0] = v
		}
		if first || v > r[1] {
			r[1] = v
		}
	}
	for _, c := range sw.Configs {
		span(&rg.BatchSize, c.BatchSize)
		span(&rg.GlobalBatch, c.GlobalBatch)
		span(&rg.Ranks, c.Ranks)
		first = false
		rule := c.LRScaling
		if c.Warmup != "" && c.Warmup != "0" {
			rule += ", warm-up " + c.Warmup
		}
		if rule != "" && !slices.Contains(rg.LRRules, rule) {
			rg.LRRules = append(rg.LRRules, rule)
		}
		if c.SamplesPerSec.N > 0 {
			rg.SamplesPerSec = fspan(rg.SamplesPerSec, c.SamplesPerSec.Mean)
		}
		if c.Accuracy.N > 0 {
			rg.Accuracy = fspan(rg.Accuracy, c.Accuracy.Mean)
		}
	}
	return rg
}

// fspan widens r (nil: empty) to hold v.
func fspan(r *[2]float64, v float64) *[2]float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return r
	}
	if r == nil {
		return &[2]float64{v, v}
	}
	return &[2]float64{min(r[0], v), max(r[1], v)}
}
