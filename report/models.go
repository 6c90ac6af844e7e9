package report

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/trace"
)

// The page models of serve's list of runs and live page, built from what
// the server read: the server reads the files, report says what they
// mean for a person.

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

// SetConfig sets the list's configuration columns of a run from its
// configuration and final metrics (the manifest's, or its summary's).
func (ri *RunInfo) SetConfig(config map[string]string, metrics trace.Metrics) {
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
