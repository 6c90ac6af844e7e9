package report

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/trace"
)

// timelineLanes are the lanes of a timeline, in the order the report
// draws them under each rank.
var timelineLanes = [...]string{"step", "compute", "collective", "send", "recv"}

func laneOf(k trace.Kind) int {
	switch k {
	case trace.KindStep:
		return 0
	case trace.KindCompute:
		return 1
	case trace.KindCollective:
		return 2
	case trace.KindSend:
		return 3
	case trace.KindRecv:
		return 4
	}
	return -1
}

// Timeline is the page model of a report's timeline, what the timeline's
// scripts draw (docs/web.md): the whole run as occupancy bins per rank and lane,
// plus every event inside a few windows of detail, chosen so that the page
// stays small whatever the run's length.
type Timeline struct {
	T0        int64          `json:"t0"` // always 0: times are ns since the run's first event
	T1        int64          `json:"t1"`
	Ranks     []int          `json:"ranks"`
	Hosts     []string       `json:"hosts"`
	Lanes     []string       `json:"lanes"`
	Names     []string       `json:"names"`
	Algos     []string       `json:"algos"`
	Comms     []string       `json:"comms"`
	Bins      TimelineBins   `json:"bins"`
	Events    TimelineEvents `json:"events"`
	Links     [][2]int       `json:"links"`
	Windows   [][2]int64     `json:"windows"`
	Truncated int64          `json:"truncated"` // events drawn only as occupancy, not in Events

	base *TimelineBase // the part that does not depend on the windows of detail
}

// TimelineBase is the part of a run's timeline that does not depend on
// where its detail is: the ranks drawn, the occupancy bins and the names
// they use, and how many events are drawn. Building it reads every event
// of the run; a server that answers windows of detail (ReadTimelineWindow)
// builds it once and then reads only the batches that hold a window.
type TimelineBase struct {
	bins  int // the Bins option it was built with
	ranks []int
	hosts []string
	occ   TimelineBins
	names []string
	drawn int64
	spans [][][2]int64 // by stream: the extent of each of its batches (ReadTimeline's)
}

// Base returns the part of t that does not depend on its windows.
func (t *Timeline) Base() *TimelineBase { return t.base }

// TimelineBins is per-mille occupancy of N equal bins per rank and lane.
type TimelineBins struct {
	N     int           `json:"n"`
	Width int64         `json:"width"`
	Rows  []TimelineRow `json:"rows"`
}

// TimelineRow is one rank and lane's bins: Busy in per-mille of the bin,
// Name the index of the name that filled most of it (-1 when empty).
type TimelineRow struct {
	Rank int     `json:"rank"`
	Lane int     `json:"lane"`
	Busy []int32 `json:"busy"`
	Name []int32 `json:"name"`
}

// TimelineEvents are the detail events, columnar, sorted by rank, lane
// and start; Start is delta-encoded within each rank and lane.
type TimelineEvents struct {
	Rank  []int32 `json:"rank"`
	Lane  []int8  `json:"lane"`
	Name  []int32 `json:"name"`
	Start []int64 `json:"start"`
	Dur   []int64 `json:"dur"`
	Bytes []int64 `json:"bytes"`
	Peer  []int32 `json:"peer"`
	Seq   []int64 `json:"seq"`
	Algo  []int32 `json:"algo"`
	Step  []int32 `json:"step"`
	Wait  []int64 `json:"wait"`
	Comm  []int32 `json:"comm"` // index into Comms
}

// TimelineOptions bound a timeline's size.
type TimelineOptions struct {
	Bins   int // bins across the run (default: 1500, fewer above 40 ranks)
	Detail int // most detail events (default 100,000)
	// Window, if its end is after its start, is the one span (ns since the
	// run's first event) whose events are kept in detail, instead of the
	// spans chosen around steps: what a viewer zoomed into asks for.
	Window [2]int64
}

// timelineBuilder accumulates a run's events into a Timeline. It needs
// the run's summary first, to know the run's span and where the detail
// windows go; feed it every rank's batches (ranks may be fed in parallel
// through their own timelineRank) and call finalize.
type timelineBuilder struct {
	sum     *analyze.Summary
	opt     TimelineOptions
	t0, w   int64
	windows [][2]int64    // candidates, twice the budget wide
	base    *TimelineBase // given: the bins are not built again
	ranks   map[int]*timelineRank
	rankIDs []int
	show    map[int]bool // the ranks drawn; nil for all (shownRanks)
}

// newTimeline starts a timeline of the run s summarizes.
func newTimeline(s *analyze.Summary, opt TimelineOptions) *timelineBuilder {
	if opt.Bins <= 0 {
		// About 300,000 cells in all, so that the occupancy of a run of
		// many ranks stays a few MB of page: 1500 bins up to 40 ranks,
		// fewer beyond, never under 100.
		opt.Bins = min(1500, max(100, 300_000/(5*max(1, s.Run.Ranks))))
	}
	if opt.Detail <= 0 {
		opt.Detail = DefaultDetail
	}
	b := &timelineBuilder{sum: s, opt: opt, t0: s.Run.FirstNS, ranks: map[int]*timelineRank{}, show: shownRanks(s)}
	b.w = max(1, (s.Run.SpanNS+int64(opt.Bins)-1)/int64(opt.Bins))
	b.windows = detailWindows(s, 2*opt.Detail)
	if w := opt.Window; w[1] > w[0] {
		b.windows = [][2]int64{{s.Run.FirstNS + w[0], s.Run.FirstNS + w[1]}}
	}
	return b
}

// detailWindows picks up to three spans of the run holding about budget
// events together: the whole run if it is small; else, around the
// slowest step, the median step and the second step (the first is
// usually warm-up), or evenly spaced spans for runs without steps.
func detailWindows(s *analyze.Summary, budget int) [][2]int64 {
	span, n := s.Run.SpanNS, s.Run.Events
	first := s.Run.FirstNS
	if n <= int64(budget) || span <= 0 {
		return [][2]int64{{first, first + span + 1}}
	}
	var centers []int64
	if len(s.Steps) >= 3 {
		st := slices.Clone(s.Steps)
		slow := st[0]
		for _, x := range st {
			if x.MaxNS > slow.MaxNS {
				slow = x
			}
		}
		sort.Slice(st, func(i, j int) bool { return st[i].TimeNS < st[j].TimeNS })
		med := st[len(st)/2]
		sec := s.Steps[1]
		for _, x := range []analyze.StepStats{sec, med, slow} {
			c := x.StartNS + int64(x.TimeNS/2)
			if !slices.Contains(centers, c) {
				centers = append(centers, c)
			}
		}
	} else {
		centers = []int64{first + span/6, first + span/2, first + span*5/6}
	}
	width := int64(float64(span) * float64(budget) / float64(n) / float64(len(centers)))
	var out [][2]int64
	for _, c := range centers {
		out = append(out, [2]int64{max(first, c-width/2), min(first+span+1, c+width/2)})
	}
	return mergeWindows(out)
}

func mergeWindows(w [][2]int64) [][2]int64 {
	sort.Slice(w, func(i, j int) bool { return w[i][0] < w[j][0] })
	var out [][2]int64
	for _, x := range w {
		if len(out) > 0 && x[0] <= out[len(out)-1][1] {
			out[len(out)-1][1] = max(out[len(out)-1][1], x[1])
			continue
		}
		out = append(out, x)
	}
	return out
}

// timelineRank accumulates one rank's events.
type timelineRank struct {
	b    *timelineBuilder
	rank int
	rows [5]*binRow
	dict []string      // the stream's name dictionary, which only grows
	evs  []trace.Event // detail candidates
	n    int64         // events the timeline draws (marks are not)
}

type binRow struct {
	busy []int64
	top  [][3]nameTime // the three names with most time in each bin
}

type nameTime struct {
	name int32
	t    int64
}

// rank returns rank r's accumulator. rank itself is not safe for
// concurrent use: create every rank's accumulator first, then feed each
// from its own goroutine.
func (b *timelineBuilder) rank(r int) *timelineRank {
	if tr, ok := b.ranks[r]; ok {
		return tr
	}
	tr := &timelineRank{b: b, rank: r}
	b.ranks[r] = tr
	b.rankIDs = append(b.rankIDs, r)
	return tr
}

// sink returns what takes rank r's batches: its accumulator, or nothing
// for a rank the timeline does not draw.
func (b *timelineBuilder) sink(r int) func(*trace.Batch) {
	if b.show != nil && !b.show[r] {
		return func(*trace.Batch) {}
	}
	return b.rank(r).addBatch
}

// timelineColumns are the trace columns a timeline reads (the rank is its
// stream's).
var timelineColumns = []string{trace.ColKind, trace.ColName, trace.ColStart, trace.ColDur, trace.ColBytes, trace.ColPeer,
	trace.ColSeq, trace.ColStep, trace.ColAlgo, trace.ColWait, trace.ColComm, trace.ColChunk}

// addBatch adds one batch of the rank's events, decoded to at least
// timelineColumns.
func (tr *timelineRank) addBatch(bt *trace.Batch) {
	b := tr.b
	if len(bt.Names) < len(tr.dict) || (len(tr.dict) > 0 && bt.Names[len(tr.dict)-1] != tr.dict[len(tr.dict)-1]) {
		tr.dict = tr.dict[:0] // not a continuation of the same stream's dictionary
	}
	tr.dict = append(tr.dict, bt.Names[len(tr.dict):]...)
	for i := 0; i < bt.Len; i++ {
		lane := laneOf(bt.Kind[i])
		if lane < 0 {
			continue
		}
		tr.n++
		start, dur := bt.Start[i], bt.Dur[i]
		name := bt.Name[i]
		if b.base != nil {
			tr.detail(bt, i, name)
			continue
		}
		row := tr.rows[lane]
		if row == nil {
			row = &binRow{busy: make([]int64, b.opt.Bins), top: make([][3]nameTime, b.opt.Bins)}
			tr.rows[lane] = row
		}
		lo := start - b.t0
		hi := lo + max(dur, 1)
		for k := max(lo/b.w, 0); k < int64(b.opt.Bins) && k*b.w < hi; k++ {
			ov := min(hi, (k+1)*b.w) - max(lo, k*b.w)
			if ov <= 0 {
				continue
			}
			row.busy[k] += ov
			row.note(int(k), name, ov)
		}
		tr.detail(bt, i, name)
	}
}

// detail keeps event i of bt if it is in one of the windows of detail.
func (tr *timelineRank) detail(bt *trace.Batch, i int, name int32) {
	start, dur := bt.Start[i], bt.Dur[i]
	for _, w := range tr.b.windows {
		if start < w[1] && start+dur >= w[0] {
			tr.evs = append(tr.evs, trace.Event{Rank: int32(tr.rank), Kind: bt.Kind[i], Name: bt.Names[name], Start: start, Dur: dur,
				Bytes: bt.Bytes[i], Peer: bt.Peer[i], Seq: bt.Seq[i], Step: bt.Step[i], Algo: bt.Algos[bt.Algo[i]],
				Chunk: bt.Chunk[i], Comm: bt.Comms[bt.Comm[i]], Wait: bt.Wait[i]})
			return
		}
	}
}

// note adds t ns of name to bin k's three leading names. Names are keyed
// by their index in the stream's dictionary.
func (r *binRow) note(k int, name int32, t int64) {
	top := &r.top[k]
	for j := range top {
		if top[j].t > 0 && top[j].name == name {
			top[j].t += t
			return
		}
	}
	m := 0
	for j := range top {
		if top[j].t < top[m].t {
			m = j
		}
	}
	if top[m].t < t || top[m].t == 0 {
		top[m] = nameTime{name, t}
	}
}

// finalize builds the timeline.
func (b *timelineBuilder) finalize() *Timeline {
	s := b.sum
	td := &Timeline{T1: s.Run.SpanNS, Lanes: timelineLanes[:], Names: []string{}, Algos: []string{}, Comms: []string{},
		Ranks: []int{}, Hosts: []string{}, Links: [][2]int{}, Windows: [][2]int64{}}
	td.Bins = TimelineBins{N: b.opt.Bins, Width: b.w, Rows: []TimelineRow{}}
	ids := map[string]int32{} // td.Names' indices
	slices.Sort(b.rankIDs)
	if base := b.base; base != nil {
		td.Ranks, td.Hosts, td.Bins = slices.Clone(base.ranks), slices.Clone(base.hosts), base.occ
		for _, n := range base.names {
			intern(&td.Names, ids, n)
		}
		td.base = base
	} else {
		drawn := b.bins(td, ids)
		td.base = &TimelineBase{bins: b.opt.Bins, ranks: td.Ranks, hosts: td.Hosts, occ: td.Bins, names: slices.Clone(td.Names), drawn: drawn}
	}
	b.details(td, ids, td.base.drawn)
	return td
}

// intern returns str's index in list, whose indices m holds, adding it.
func intern(list *[]string, m map[string]int32, str string) int32 {
	if i, ok := m[str]; ok {
		return i
	}
	i := int32(len(*list))
	*list = append(*list, str)
	m[str] = i
	return i
}

// bins fills td's ranks, hosts and occupancy bins, interning the names
// the bins show in td.Names (ids), and returns how many events are drawn.
func (b *timelineBuilder) bins(td *Timeline, ids map[string]int32) int64 {
	s := b.sum
	hosts := map[int]string{}
	for _, r := range s.Ranks {
		hosts[r.Rank] = r.Host
	}
	var drawn int64
	for _, r := range b.rankIDs {
		drawn += b.ranks[r].n
		td.Ranks = append(td.Ranks, r)
		td.Hosts = append(td.Hosts, hosts[r])
		tr := b.ranks[r]
		for lane, row := range tr.rows {
			if row == nil {
				continue
			}
			out := TimelineRow{Rank: r, Lane: lane, Busy: make([]int32, len(row.busy)), Name: make([]int32, len(row.busy))}
			for k, busy := range row.busy {
				out.Busy[k] = int32(min(1000, busy*1000/b.w))
				out.Name[k] = -1
				best := nameTime{}
				for _, nt := range row.top[k] {
					if nt.t > best.t {
						best = nt
					}
				}
				if best.t > 0 && int(best.name) < len(tr.dict) {
					out.Name[k] = intern(&td.Names, ids, tr.dict[best.name])
				}
			}
			td.Bins.Rows = append(td.Bins.Rows, out)
		}
	}
	return drawn
}

// details fills td's events of detail, their windows and the links
// between them; td.Names holds the names the bins show (ids), and drawn
// is how many events the timeline draws.
func (b *timelineBuilder) details(td *Timeline, ids map[string]int32, drawn int64) {
	// Detail: keep the windows' events, shrinking the windows around their
	// centres until they fit the budget.
	var all []trace.Event
	for _, r := range b.rankIDs {
		all = append(all, b.ranks[r].evs...)
	}
	windows := slices.Clone(b.windows)
	inWindows := func(e *trace.Event, ws [][2]int64) bool {
		for _, w := range ws {
			if e.Start < w[1] && e.Start+e.Dur >= w[0] {
				return true
			}
		}
		return false
	}
	for iter := 0; iter < 30; iter++ {
		n := 0
		for i := range all {
			if inWindows(&all[i], windows) {
				n++
			}
		}
		if n <= b.opt.Detail {
			break
		}
		for i, w := range windows {
			c, half := (w[0]+w[1])/2, (w[1]-w[0])/2
			half = int64(float64(half) * 0.8 * float64(b.opt.Detail) / float64(n))
			windows[i] = [2]int64{c - half, c + half}
		}
	}
	kept := all[:0]
	for i := range all {
		if inWindows(&all[i], windows) {
			kept = append(kept, all[i])
		}
	}
	td.Truncated = drawn - int64(len(kept))
	for _, w := range windows {
		td.Windows = append(td.Windows, [2]int64{w[0] - b.t0, w[1] - b.t0})
	}
	sort.Slice(kept, func(i, j int) bool {
		a, c := &kept[i], &kept[j]
		if a.Rank != c.Rank {
			return a.Rank < c.Rank
		}
		if la, lc := laneOf(a.Kind), laneOf(c.Kind); la != lc {
			return la < lc
		}
		return a.Start < c.Start
	})
	ev := &td.Events
	algoIDs, commIDs := map[string]int32{}, map[string]int32{}
	prevRow, prev := [2]int32{-1, -1}, int64(0)
	for i := range kept {
		e := &kept[i]
		lane := laneOf(e.Kind)
		row := [2]int32{e.Rank, int32(lane)}
		if row != prevRow {
			prevRow, prev = row, b.t0
		}
		ev.Rank = append(ev.Rank, e.Rank)
		ev.Lane = append(ev.Lane, int8(lane))
		ev.Name = append(ev.Name, intern(&td.Names, ids, e.Name))
		ev.Start = append(ev.Start, e.Start-prev)
		prev = e.Start
		ev.Dur = append(ev.Dur, e.Dur)
		ev.Bytes = append(ev.Bytes, e.Bytes)
		ev.Peer = append(ev.Peer, e.Peer)
		ev.Seq = append(ev.Seq, e.Seq)
		ev.Algo = append(ev.Algo, intern(&td.Algos, algoIDs, e.Algo))
		ev.Step = append(ev.Step, e.Step)
		ev.Wait = append(ev.Wait, e.Wait)
		ev.Comm = append(ev.Comm, intern(&td.Comms, commIDs, e.Comm))
	}
	// Links between the kept sends and receives, as indices into Events.
	base := map[int32]int{}
	for i := range kept {
		if _, ok := base[kept[i].Rank]; !ok {
			base[kept[i].Rank] = i
		}
	}
	maxRank := int32(-1)
	for r := range base {
		maxRank = max(maxRank, r)
	}
	ranks := make([][]trace.Event, maxRank+1)
	for r, i := range base {
		j := i
		for j < len(kept) && kept[j].Rank == r {
			j++
		}
		ranks[r] = kept[i:j]
	}
	for _, l := range analyze.MatchMessages(ranks) {
		td.Links = append(td.Links, [2]int{base[l.Send.Rank] + l.Send.Index, base[l.Recv.Rank] + l.Recv.Index})
	}
}

// TimelineKeep is what a timeline needs of a run's events, for
// load.Load: the events it draws, with the columns it reads, in at most
// budget bytes of memory (0: load.DefaultBudget). BuildTimeline then
// builds the timeline of the run without reading it again.
func TimelineKeep(budget int64) *load.Keep {
	k := &load.Keep{Columns: timelineColumns, Budget: budget}
	for kd := range 256 {
		if laneOf(trace.Kind(kd)) >= 0 {
			k.Kinds = append(k.Kinds, trace.Kind(kd))
		}
	}
	return k
}

// BuildTimeline builds the timeline of a run that load.Load read with
// TimelineKeep: from the events it kept, or, when they did not fit its
// budget (run.Reread), by reading the run's streams again for the
// columns a timeline needs.
func BuildTimeline(ctx context.Context, run *load.Run, opt TimelineOptions) (*Timeline, error) {
	tb := newTimeline(run.Summary, opt)
	if err := run.Replay(ctx, func(_, rank int) func(*trace.Batch) { return tb.sink(rank) }); err != nil {
		return nil, err
	}
	return tb.finalize(), nil
}

// ReadTimelineWindow is ReadTimeline for a timeline whose detail is
// opt.Window, given its base (Timeline.Base of a timeline of the same run
// and summary with the same Bins option): it reads only the batches that
// hold events of the window, and its answer is ReadTimeline's.
func ReadTimelineWindow(ctx context.Context, dir string, s *analyze.Summary, opt TimelineOptions, base *TimelineBase) (*Timeline, error) {
	w := opt.Window
	if w[1] <= w[0] {
		return nil, fmt.Errorf("a timeline window needs its end after its start: [%d, %d)", w[0], w[1])
	}
	tb := newTimeline(s, opt)
	switch {
	case base == nil:
		return nil, errors.New("a timeline window needs the timeline's base")
	case base.bins != tb.opt.Bins:
		return nil, fmt.Errorf("the timeline's base was built with %d bins, not %d", base.bins, tb.opt.Bins)
	}
	tb.base = base
	err := load.EventsWithin(ctx, dir, timelineColumns, tb.windows[0][0], tb.windows[0][1], base.spans, func(_, rank int) func(*trace.Batch) { return tb.sink(rank) })
	if err != nil {
		return nil, err
	}
	return tb.finalize(), nil
}

// ReadTimeline reads the run in dir for its timeline; s is the run's
// summary. It decodes only the columns the timeline needs.
func ReadTimeline(ctx context.Context, dir string, s *analyze.Summary, opt TimelineOptions) (*Timeline, error) {
	tb := newTimeline(s, opt)
	// Each batch's extent, for the windows read later (ReadTimelineWindow).
	var lists []*[][2]int64 // by stream
	err := load.Events(ctx, dir, timelineColumns, func(stream, rank int) func(*trace.Batch) {
		for len(lists) <= stream {
			lists = append(lists, nil)
		}
		own := new([][2]int64)
		lists[stream] = own
		sink := tb.sink(rank)
		return func(b *trace.Batch) {
			sp, ok := trace.BatchSpan(b)
			if !ok {
				sp = [2]int64{math.MaxInt64, math.MinInt64} // holds nothing
			}
			*own = append(*own, sp)
			sink(b)
		}
	})
	if err != nil {
		return nil, err
	}
	td := tb.finalize()
	td.base.spans = make([][][2]int64, len(lists))
	for i, l := range lists {
		if l != nil {
			td.base.spans[i] = *l
		}
	}
	return td, nil
}
