package report

import (
	"context"
	"io"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/load"
)

// Defaults of a run's page, for `commprof report`, the pages `sweep`
// writes and those `serve` answers alike.
const (
	// DefaultDetail is how many events the timeline shows one by one.
	DefaultDetail = 100_000
	// DefaultTimelineMemory is the memory for the events the timeline is
	// built from, kept in the read that summarizes the run; a run whose
	// events need more is read a second time for them.
	DefaultTimelineMemory = 64 << 20
)

// RunPageOptions say how a run's page is built.
type RunPageOptions struct {
	Timeline TimelineOptions // Detail 0 is DefaultDetail
	// Memory bounds the events kept with the summary for the timeline
	// (0: DefaultTimelineMemory).
	Memory int64
	// Fit, when not nil, is a calibrated model's fit the page shows
	// instead of the one fitted to the run (commprof calibrate).
	Fit  *analyze.Fit
	Page Options
}

// RunPage is one run's report page, built and ready to write: the one
// assembly behind `commprof report`, `commprof sweep` and `commprof
// serve`.
type RunPage struct {
	Summary  *analyze.Summary
	Timeline *Timeline
	// Reread says the timeline's events did not fit the memory they were
	// given, so the run was read a second time for them.
	Reread bool
	opt    Options
}

// LoadRunPage reads the run in dir, once when its timeline's events fit
// o.Memory, and builds its page.
func LoadRunPage(ctx context.Context, dir string, o RunPageOptions) (*RunPage, error) {
	if o.Memory <= 0 {
		o.Memory = DefaultTimelineMemory
	}
	run, err := load.Load(ctx, dir, TimelineKeep(o.Memory))
	if err != nil {
		return nil, err
	}
	return NewRunPage(ctx, dir, run.Summary, run, o)
}

// NewRunPage builds the page of the run in dir whose summary is s: from
// the events read kept (load.Load with TimelineKeep), or, with read nil
// (the summary came from a cache), by reading the run again for its
// timeline's columns.
func NewRunPage(ctx context.Context, dir string, s *analyze.Summary, read *load.Run, o RunPageOptions) (*RunPage, error) {
	if o.Timeline.Detail <= 0 {
		o.Timeline.Detail = DefaultDetail
	}
	if o.Fit != nil {
		s.UseFit(*o.Fit)
	}
	p := &RunPage{Summary: s, opt: o.Page}
	var err error
	if read != nil {
		p.Timeline, err = BuildTimeline(ctx, read, o.Timeline)
		p.Reread = read.Reread()
	} else {
		p.Timeline, err = ReadTimeline(ctx, dir, s, o.Timeline)
		p.Reread = true
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Write writes the page as one self-contained HTML file.
func (p *RunPage) Write(w io.Writer) error { return WriteHTML(w, p.Summary, p.Timeline, p.opt) }
