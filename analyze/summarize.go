package analyze

import (
	"io"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/commprof/commprof/trace"
)

// Meta is what a summary needs to know about a run besides its events:
// the manifest's facts, filled by whoever read the run.
type Meta struct {
	Dir       string
	Manifest  *trace.Manifest // nil if the run has none
	WorldSize int
	DiskBytes int64
	Problems  []string
	// ReplayOps bounds the operations the what-if replay lays out (0:
	// replayBudget); a longer run is replayed over a stretch of it.
	ReplayOps int64
	// Spill, if set, opens the file where the summary writes the packed
	// collective calls and spans past 128 MiB of them, and reads them back
	// (load gives a temporary file, removed as it is made). Unset, they
	// all stay in memory.
	Spill func() (SpillFile, error)
}

// SpillFile is written at offsets and read back; closed, if it is an
// io.Closer, once the summary is done.
type SpillFile interface {
	io.ReaderAt
	io.WriterAt
}

// PointToPoint is the op name of messages sent with Send and Recv rather
// than inside a collective (a parameter server's pushes and pulls). Their
// spans count as communication time like collectives'.
const PointToPoint = "sendrecv"

// Summarizer accumulates a run's events. Ranks are fed through their own
// RankSummarizer, which may run in parallel with the others'; Finalize
// merges them. A Summarizer is used once.
type Summarizer struct {
	meta Meta

	mu     sync.RWMutex // guards strs, strIdx and ranks: ranks are fed in parallel
	strs   []string
	strIdx map[string]int32
	ranks  map[int]*RankSummarizer
	p2p    int32 // the name of point-to-point messages, which belong to no collective
	direct int32 // the algorithm "direct" (point-to-point collectives, whose patterns are by call)
	chunk  int   // the calls a pass over them holds at once (0: callChunk); tests set it
	// shareCalls is the calls from which passes over them are shared
	// (0: shareCalls); tests set it.
	shareCalls int
	spill      *logSpill
	ord        []int32 // each interned string's place in the strings' order, from Finalize on
}

// NewSummarizer starts a summary of a run.
func NewSummarizer(meta Meta) *Summarizer {
	s := &Summarizer{meta: meta, strIdx: map[string]int32{}, ranks: map[int]*RankSummarizer{}, spill: &logSpill{budget: callLogBudget, open: meta.Spill}}
	// A summary given up before Finalize lets its spill file go too.
	runtime.AddCleanup(s, func(sp *logSpill) { sp.close() }, s.spill)
	s.intern("")
	s.p2p = s.intern(PointToPoint)
	s.direct = s.intern("direct")
	return s
}

func (s *Summarizer) intern(str string) int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.strIdx[str]; ok {
		return i
	}
	i := int32(len(s.strs))
	s.strs = append(s.strs, str)
	s.strIdx[str] = i
	return i
}

// str is the string interned as i. Other ranks' goroutines may be
// interning as it reads.
func (s *Summarizer) str(i int32) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.strs[i]
}

// stringOrder returns each interned string's place among them in sorted
// order: ranks read in parallel intern names in any order, and the calls
// merge in the order of their communicators' names.
func (s *Summarizer) stringOrder() []int32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ids := make([]int32, len(s.strs))
	for i := range ids {
		ids[i] = int32(i)
	}
	slices.SortFunc(ids, func(a, b int32) int { return strings.Compare(s.strs[a], s.strs[b]) })
	ord := make([]int32, len(ids))
	for place, id := range ids {
		ord[id] = int32(place)
	}
	return ord
}

// Finalize merges the ranks and computes every figure. Call it once,
// after every RankSummarizer has been fed.
func (s *Summarizer) Finalize() *Summary {
	sum := &Summary{SchemaVersion: SchemaVersion, Findings: []string{}, Marks: []Mark{}, Problems: s.meta.Problems}
	if sum.Problems == nil {
		sum.Problems = []string{}
	}
	ranks := make([]*RankSummarizer, 0, len(s.ranks))
	for _, rs := range s.ranks {
		ranks = append(ranks, rs)
	}
	sort.Slice(ranks, func(i, j int) bool { return ranks[i].rank < ranks[j].rank })
	world := s.meta.WorldSize
	rows := 0 // per-rank tables are indexed by the ranks that have streams
	for _, rs := range ranks {
		world = max(world, rs.world, rs.rank+1)
		rows = max(rows, rs.rank+1)
	}
	sum.Run = s.runInfo(ranks, world)
	ext, far := s.extent(ranks)
	sum.Problems = append(sum.Problems, far...)

	for _, rs := range ranks {
		rs.settle()
	}
	s.ord = s.stringOrder()
	src := s.callSource(ranks, s.classifyCalls(ranks), rows)
	cen := s.census(ranks, src)
	// The analyses below only read the calls (each its own passes over
	// them) and the ranks' accumulators, and each writes its own part of
	// the summary: they run side by side.
	var wg sync.WaitGroup
	par := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f()
		}()
	}
	par(func() { sum.Collectives, sum.Ops = s.collStats(src, cen) })
	var sp []rankSpans
	par(func() {
		sp = s.spans(ranks, src, rows)
		var both sync.WaitGroup
		both.Go(func() { sum.Ranks = s.rankStats(ranks, src, cen, sp, rows) })
		sum.Steps, sum.StepSummary = s.steps(ranks, src, sp, sum.Run.SamplesPerStep)
		both.Wait()
	})
	par(func() {
		sum.Matrix, sum.OpMatrices = s.matrices(ranks, ext)
		sum.MessageSizes = s.messageSizes(ranks)
		sum.Compute = s.computeNames(ranks)
		sum.Patterns = s.patterns(ranks, src)
	})
	par(func() { sum.Skew = s.skew(src, cen, rows, ext) })
	par(func() { sum.fitAcc = s.fitSums(ranks, src, cen.bench) })
	var stepCalls []callSize
	par(func() { stepCalls = s.stepCalls(src) })
	par(func() { sum.Stragglers = s.stragglers(ranks, src, cen) })
	wg.Wait()
	sum.Resources = s.resources(ranks, sum.Ranks, sum.Steps, sum.Run.SamplesPerStep)
	if len(sum.Steps) > 0 {
		for _, st := range sum.Steps {
			sum.StepSummary.CoreWaitNS += st.CoreWaitNS
		}
		sum.StepSummary.CoreWaitNS /= float64(len(sum.Steps))
	}
	sum.PointToPoint = pointToPoint(ranks, sp, sum.StepSummary.Steps)
	labelPatterns(sum)
	for _, rs := range ranks {
		sum.Marks = append(sum.Marks, rs.marks...)
	}
	sort.SliceStable(sum.Marks, func(i, j int) bool { return sum.Marks[i].AtNS < sum.Marks[j].AtNS })
	sum.Epochs = epochs(sum.Marks, sum.Steps, sum.Run.FirstNS, sum.Run.SamplesPerStep)
	sum.Fit = sum.fitAcc.solve()
	sum.stepCalls = perStep(stepCalls, len(sum.Steps))
	s.spill.close()
	if err := s.spill.err; err != nil {
		sum.Problems = append(sum.Problems, err.Error())
	}
	sum.Projection = sum.Project(DefaultProjectionRanks(world), nil)
	if src := sum.Run.Source; src != nil && src.ToolPhases {
		sum.forgetProgramWork()
	}
	if src := sum.Run.Source; src != nil && src.Format == "pmpi" {
		// The PMPI library sees the program's MPI calls, not its compute
		// between them, nor when a message arrived within a receive (its
		// wait before the first byte reads 0).
		sum.Unknown = append(sum.Unknown, "compute", "recv_wait")
		// Nor, then, a hub's bandwidth while receiving: its receives'
		// time includes waiting for the senders.
		for i := range sum.PointToPoint.Hubs {
			sum.PointToPoint.Hubs[i].GBps = 0
		}
	}
	if src := sum.Run.Source; src != nil && (src.Untimed || src.NoDurations) {
		sum.forgetTimes(!src.Untimed)
	}
	if src := sum.Run.Source; src != nil && src.PartialRanks {
		sum.unknown("communication")
	}
	sum.Headline = headline(sum)
	sum.Findings = findings(sum)
	return sum
}

func (s *Summarizer) runInfo(ranks []*RankSummarizer, world int) RunInfo {
	ri := RunInfo{Dir: s.meta.Dir, WorldSize: world, Ranks: len(ranks), DiskBytes: s.meta.DiskBytes,
		Config: map[string]string{}, Metrics: map[string]float64{}, Hosts: []string{}, Command: []string{},
		Injected: []string{}, Contention: s.contention()}
	first, last := int64(0), int64(0)
	seen := false
	for _, rs := range ranks {
		ri.Events += rs.events
		if !rs.spanned {
			continue
		}
		if !seen || rs.first < first {
			seen = true
			first = rs.first
		}
		last = max(last, rs.last)
	}
	ri.FirstNS, ri.SpanNS = first, max(last-first, 0)
	hosts := map[string]bool{}
	for _, rs := range ranks {
		if rs.host != "" && !hosts[rs.host] {
			hosts[rs.host] = true
			ri.Hosts = append(ri.Hosts, rs.host)
		}
	}
	if m := s.meta.Manifest; m != nil {
		ri.Name, ri.ID, ri.Status, ri.Error = m.Name, m.RunID, m.Status, m.Error
		if m.Command != nil {
			ri.Command = m.Command
		}
		for k, v := range m.Config {
			ri.Config[k] = v
		}
		for k, v := range m.Metrics {
			ri.Metrics[k] = v
		}
		if !m.Start.IsZero() {
			ri.Start = m.Start.UTC().Format("2006-01-02T15:04:05Z07:00")
		}
		ri.ClockMethod, ri.ClockUncertNS = m.Clock.Method, m.Clock.UncertaintyNS
		ri.Source = m.Source
		ri.Injected = append(ri.Injected, m.Injected...)
	}
	ri.BatchSize = trace.ParseConfig(ri.Config).BatchSize
	ri.SamplesPerStep = ri.BatchSize * world
	return ri
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
