package analyze

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/commprof/commprof/internal/units"
)

// Stragglers says which ranks cost the others time, by what-if analysis
// (after Lin et al., "Understanding Stragglers in Large Model Training
// Using What-if Analysis", OSDI '25): the run is replayed over its real
// dependencies (each rank's own work between its communication calls, a
// collective that completes only once its members have arrived, a
// message that arrives only after it was sent), first as recorded, then
// with one rank's own work held to what the other ranks took for the
// same part of the program. What the replay saves is the time that
// rank's slowness cost the job.
type Stragglers struct {
	// Replayed is false when the run has no communication to replay;
	// Reason then says why.
	Replayed bool   `json:"replayed"`
	Reason   string `json:"reason,omitempty"`
	// Basis is what Windows counts: "step" (training steps) or "call"
	// (world collectives, for runs without steps).
	Basis   string `json:"basis"`
	Windows int    `json:"windows"`
	// TotalNS is the replayed time from the first rank's first call to
	// the last rank's last one; ReplayErrorNS the largest difference
	// between a replayed and a recorded end (the replay's own check: the
	// recorded run must replay to itself).
	TotalNS       int64 `json:"total_ns"`
	ReplayErrorNS int64 `json:"replay_error_ns"`
	// NoiseNS is what holding a rank that is not named saves, the median
	// over them: the noise floor a named rank's cost is counted above.
	NoiseNS int64 `json:"noise_ns"`
	// SplitKnown says whether WorkNS and TransferNS were measured (by the
	// replay); where the run could not be replayed they are unknown, not 0.
	SplitKnown bool `json:"split_known"`
	// WorkOnly says that only the ranks' own work was held to typical:
	// the trace does not say when messages arrived (PMPI), so a rank's
	// time waiting in a transfer is not told apart from its peers'.
	WorkOnly bool `json:"work_only,omitempty"`
	// NoiseBoundNS is the most the costliest rank of this run would be
	// seen to cost, at Confidence, if no rank were slow of its own: a
	// bootstrap of the other ranks' window-by-window savings. A rank is
	// named only above it (and above 5% of the run); -1 where no verdict
	// was given (Undecided says why).
	NoiseBoundNS int64   `json:"noise_bound_ns"`
	Confidence   float64 `json:"confidence"`
	Undecided    string  `json:"undecided,omitempty"`
	// Why says, where no rank is named, which part of the rule the
	// costliest rank fell short of.
	Why string `json:"why,omitempty"`
	// BalancedNS is the replayed time with every rank's own work held to
	// the typical (median over ranks) time: what the job would take with
	// no straggling at all; BalancedSlowdown is TotalNS over it.
	BalancedNS       int64   `json:"balanced_ns"`
	BalancedSlowdown float64 `json:"balanced_slowdown"`
	// Ranks lists, most costly first, what each rank's excess cost.
	Ranks []RankCost `json:"ranks"`
	// Named are the ranks found to be stragglers, most costly first; the
	// headline's straggler is the first, or -1 when none is named.
	Named []int `json:"named"`
	// WindowNS is the mean window (step) as recorded, WithoutNS the same
	// without the named stragglers' excess.
	WindowNS  float64 `json:"window_ns"`
	WithoutNS float64 `json:"without_ns"`
	// CriticalPath is the cross-rank critical path of the slowest window.
	CriticalPath *CriticalPath `json:"critical_path,omitempty"`
	// Sample is set when the run was too long to replay whole: every
	// figure above is then of the stretch it names, in the run's middle.
	Sample *ReplaySample `json:"sample,omitempty"`
}

// RankCost is what one rank's slowness cost the job.
type RankCost struct {
	Rank int `json:"rank"`
	// CostNS is the time this rank's slowness cost the job: what the
	// replay saves with its own work, and its own part of each transfer,
	// held to what the other ranks took for the same part of the program.
	// For a rank that is not named that is what holding it alone saves
	// (AloneNS). A named straggler's is what holding it saves beyond the
	// noise floor (Stragglers.NoiseNS); named stragglers share what holding
	// them all saves (their Shapley values): two ranks slow alike hide each
	// other, so holding either alone saves little, and each is given half
	// of what holding both saves. Share is CostNS over TotalNS.
	CostNS  int64   `json:"cost_ns"`
	AloneNS int64   `json:"alone_ns"`
	Share   float64 `json:"share"`
	// PerWindowNS is CostNS per window; Windows is how many windows it
	// cost time in (over 1% of the mean window): how sure the verdict is.
	PerWindowNS float64 `json:"per_window_ns"`
	Windows     int     `json:"windows"`
	// WorkNS and TransferNS split a named rank's cost by the kind of
	// operation it was slow in, its own work between communication calls
	// (compute, data loading, a delay before a call) or its own part of
	// the transfers, in proportion to what holding only that part saves;
	// 0 for ranks that are not named.
	WorkNS     int64 `json:"work_ns"`
	TransferNS int64 `json:"transfer_ns"`
	// ExcessNS is how much longer its own work took than the typical rank's,
	// summed over the run, whether or not it cost anyone time.
	ExcessNS int64 `json:"excess_ns"`
}

// CriticalPath is the chain of work and waits that set one window's
// length, across ranks.
type CriticalPath struct {
	Window   int           `json:"window"` // step number (or call index)
	StartNS  int64         `json:"start_ns"`
	EndNS    int64         `json:"end_ns"`
	Segments []PathSegment `json:"segments"`
	// ByRank sums the path's own-work segments per rank (ns), ByComm the
	// segments spent moving data.
	ByRank map[int]int64 `json:"by_rank"`
	CommNS int64         `json:"comm_ns"`
}

// PathSegment is one piece of a critical path: a rank's own work, or
// communication (a collective's transfer after its last member arrived,
// a message in flight).
type PathSegment struct {
	Rank    int    `json:"rank"`
	Kind    string `json:"kind"` // "work" or "comm"
	What    string `json:"what"` // e.g. "before allreduce #12", "allreduce #12"
	StartNS int64  `json:"start_ns"`
	EndNS   int64  `json:"end_ns"`
}

// Naming rule: a rank is a straggler when what holding it to the typical
// pace saves stands above the run's own noise. The noise is measured in
// the same run: what holding each of the other ranks saves, window by
// window, is what the scheduler's and the network's hiccups cost any
// rank. The bound is what the costliest of the ranks would save, at
// nameConfidence, if each rank's windows were drawn from those (a
// bootstrap of the others' per-window savings); a rank is named when it
// saves more than that and at least nameShare of the run.
// docs/metrics.md has the rule and its measured error rates.
const (
	nameShare      = 0.05
	nameConfidence = 0.99
	// nameMinWindows is the fewest windows a verdict is given on: fewer
	// say nothing of the run's noise.
	nameMinWindows = 4
	// nameHiccup is how many times the longest window any other rank cost
	// a cost that fell mostly in one window must be to be named.
	nameHiccup = 10
	// nameAlike is how much of the first straggler's cost another must
	// cost to be named too.
	nameAlike = 0.5
	// nameRatio is how much more than any other pair a pair of ranks
	// slow alike must save to be named together.
	nameRatio = 3
	// namePairShare is how much of the run each of a pair must cost once
	// the other is held. Two ranks slowed alike cannot be told from two
	// that share a core with other work: busy-polling MPI ranks (MPICH)
	// four to two cores made pairs of clean runs that cost 5-22% of the
	// run each, while two ranks held back at every call cost half of it.
	namePairShare = 0.25
	// whatIfCandidates bounds the ranks replayed one by one.
	whatIfCandidates = 8
	// pairCandidates is how many of the slowest ranks are tried in pairs
	// when no rank stands out alone.
	pairCandidates = 4
	// shapleyRanks bounds the named ranks that share out what holding them
	// together saves (2^shapleyRanks replays); beyond it each is given
	// what holding it alone saves.
	shapleyRanks = 4
)

// shapleyWeight is the weight of a coalition of s of n players in a
// player's Shapley value: s!(n-s-1)!/n!.
func shapleyWeight(s, n int) float64 {
	w := 1.0 / float64(n)
	for i := 1; i <= s; i++ {
		w *= float64(i) / float64(n-i)
	}
	return w
}

type opKind uint8

const (
	opStart opKind = iota // a non-blocking collective's call: arrival only
	opBlock               // a blocking collective
	opWait                // the program's wait on a non-blocking collective
	opPost                // a point-to-point send or receive posted (its call's start)
	opMWait               // the program waited for messages to complete (a blocking call's end, Wait, Waitall, Test...)
	opMark                // a window boundary (a step's start or end)
)

// rop is one operation of a rank's program, in program order.
type rop struct {
	kind       opKind
	start, end int64 // as recorded
	call       int32 // index into calls (start, block, wait), messages (post), message groups (mwait), or window
	key        int32 // what the same operation is called on every rank, for the typical own-work time
	win        int32 // the window this operation closes on its rank, -1 for none
	gap        int64 // own work before it: start minus the previous operation's release
	tail       int64 // block/start: end after the last arrival; wait, mwait: end after completion
}

// msgRec is one point-to-point message on one side: posted (the send's
// or receive's call) at post, completed at end, on rank. wait is when the
// program began to wait for it (its post, for a blocking call); first,
// for a receive, when its first byte is known to have arrived (post plus
// the recorded wait; the post where that is unknown).
type msgRec struct {
	send        bool
	nonBlocking bool
	rank        int32
	post, wait  int64
	first, end  int64
}

// replayer holds a run's program operations and dependencies.
type replayer struct {
	calls  []callRec
	inst   [][2]int
	instOf []int32 // call index -> instance
	// rootMember is, by instance, the call of its root's rank (-1 if
	// none: not a rooted collective, or the root did not record it).
	rootMember []int32
	deps       []depMode
	ops        [][]rop // by rank
	ranks      []int
	msgs       []msgRec
	msgFrom    []int32 // recv message -> send message (-1 unknown)
	lagOf      []int64 // recv message: first byte after the send was posted
	// sendTo is a send's receive (-1 unknown) when the send was still
	// going when the receiver posted, so that it waited for the
	// receiver (a message too large for the socket's buffer, a
	// synchronous send).
	sendTo []int32
	// groups are the messages each mwait operation completed together
	// (one Waitall, one Sendrecv, one blocking Send).
	groups  [][]int32
	nmsg    int
	typical []int64 // key -> median own-work time over ranks
	// typTail is, by key, the median tail over the ranks (a message's,
	// a wait's after its call completed): a rank whose tail is longer than
	// the others' for the same operation was itself slow in it.
	typTail []int64
	// A collective's transfer (its time after the last member arrived) is
	// split on each member into the time it waited for the others'
	// messages (waitIn) and its own time (the rest). ownExcess is a call's
	// own time beyond the median member's: time it was descheduled or
	// stopped inside the transfer, which the members waiting for its
	// messages waited too.
	waitIn    []int64
	ownExcess []int64
	windows   []windowRef
	// callTail is each call's recorded time after its last member
	// arrived, on its rank; opAt finds the operation (on the call's rank)
	// that arrived at a call, msgAt the operation of a message.
	callTail []int64
	// free marks the calls that completed on their rank before the
	// members they depend on arrived (nil if none did).
	free  []bool
	opAt  []int32
	msgAt [][2]int32 // message -> rank, op
	steps bool
	name  func(int32) string
	// parts are the parts of a held rank's program held to typical: its
	// own work, and its own part of transfers where the trace says when
	// its messages arrived.
	parts heldParts
}

type depMode uint8

const (
	depAll    depMode = iota // completes once every member arrived
	depRoot                  // a member completes once the root arrived (broadcast, scatter)
	depToRoot                // the root completes once every member arrived, others on their own (reduce, gather)
	depNone                  // no cross-rank dependency known
)

func depOf(op string) depMode {
	switch op {
	case "broadcast", "scatter", "scatterv":
		return depRoot
	case "reduce", "gather", "gatherv":
		return depToRoot
	case PointToPoint:
		return depNone
	}
	return depAll
}

type windowRef struct {
	id int // step number, or call index
}

// stragglers replays the run. steps are each rank's step spans.
func (s *Summarizer) stragglers(ranks []*RankSummarizer, src *callSource, cen *callCensus) Stragglers {
	out := Stragglers{Ranks: []RankCost{}, Named: []int{}, NoiseBoundNS: -1}
	var calls []callRec
	var inst [][2]int
	rr, calls, inst, sample := replayWindow(ranks, src, cen, cmp.Or(s.meta.ReplayOps, replayBudget))
	out.Sample = sample
	rp := s.newReplayer(rr, calls, inst)
	if rp == nil {
		out.Reason = "the run has no communication between ranks to replay"
		if out.Sample != nil {
			out.Reason = "the stretch of the run replayed (the run is too long to replay whole) has no communication between ranks"
		}
		return out
	}
	// Where the trace does not say when a message's first byte arrived
	// (the PMPI library's receives), a rank's time in a wait after its
	// messages were posted is not its own: its peers progress the
	// transfer too (an MPI library moves a large message only while both
	// ranks are inside MPI calls), and a rank descheduled now and then on
	// a busy core waits longer there without costing anyone. Only its
	// own work between calls is held to typical; SplitKnown stays true,
	// the transfer part reads 0 and the docs say why.
	rp.parts = holdWork | holdTransfers
	if m := s.meta.Manifest; m != nil && m.Source != nil && m.Source.Format == "pmpi" {
		rp.parts = holdWork
		out.WorkOnly = true
	}
	actual, ok := rp.replay(-1, false, nil)
	if !ok {
		// The calls cannot be ordered into one program per rank: a rank's
		// stream was cut, or (an imported timeline) the ranks joined
		// calls in different orders because nothing blocked on them.
		// Each call is then judged on its own.
		pc := perCall(calls, inst)
		pc.Sample = out.Sample
		return pc
	}
	out.Replayed = true
	out.SplitKnown = true
	out.Confidence = nameConfidence
	out.Basis = "step"
	if len(rp.windows) == 0 || !rp.hasSteps() {
		out.Basis = "call"
	}
	out.Windows = len(rp.windows)
	out.TotalNS = actual.total()
	out.ReplayErrorNS = actual.err
	balanced, _ := rp.replay(-1, true, nil)
	out.BalancedNS = balanced.total()
	if out.BalancedNS > 0 {
		out.BalancedSlowdown = float64(out.TotalNS) / float64(out.BalancedNS)
	}
	winMean := float64(0)
	if len(rp.windows) > 0 {
		winMean = float64(actual.windowSpan()) / float64(len(rp.windows))
	}
	out.WindowNS = winMean

	// Candidates: the ranks whose own work, and own part of transfers,
	// ran longest over the typical.
	excess := rp.excess()
	cands := slices.Clone(rp.ranks)
	sort.SliceStable(cands, func(i, j int) bool { return excess[cands[i]] > excess[cands[j]] })
	cands = cands[:min(len(cands), whatIfCandidates)]
	// What holding a set of ranks to the typical saves, by the set.
	type held struct {
		res    *replayResult
		saving int64
	}
	memo := map[string]held{}
	hold := func(set []int) held {
		set = slices.Sorted(slices.Values(set))
		k := fmt.Sprint(set)
		if h, ok := memo[k]; ok {
			return h
		}
		h := held{res: actual}
		if len(set) > 0 {
			h.res, _ = rp.replay(-1, false, set)
			h.saving = max(out.TotalNS-h.res.total(), 0)
		}
		memo[k] = h
		return h
	}
	countWindows := func(a, b *replayResult) (n int) {
		for _, d := range savedPerWindow(a, b) {
			if float64(d) > 0.01*winMean {
				n++
			}
		}
		return n
	}
	alone := map[int]int64{}
	perAlone := map[int][]int64{} // what holding it alone saves, window by window
	for _, r := range cands {
		h := hold([]int{r})
		alone[r] = h.saving
		perAlone[r] = savedPerWindow(actual, h.res)
	}
	// A verdict needs windows enough to measure the run's noise in.
	enough := len(rp.windows) >= nameMinWindows
	if !enough {
		out.Undecided = fmt.Sprintf("the run has %s; at least %d are needed to tell a straggler from the run's own noise",
			plural(len(rp.windows), out.Basis), nameMinWindows)
	}
	bigEnough := func(gain int64) bool { return float64(gain) >= nameShare*float64(out.TotalNS) }
	// A cost most of which fell in one window is one hiccup: a
	// scheduler's or a network's rare long one falls on some rank in a
	// busy run, and the other ranks' windows, too few to show such a
	// rare event, say nothing of how long it can be. It is named only
	// when that window is nameHiccup times the longest any other rank
	// cost (a rank that slept 200 ms once, where the others' worst was
	// a few ms).
	oneHiccup := func(per, pool []int64, gain int64) bool {
		top := slices.Max(append([]int64{0}, per...))
		if float64(top) < 0.5*float64(gain) {
			return false
		}
		return float64(top) < nameHiccup*float64(slices.Max(append([]int64{0}, pool...)))
	}
	// Name the ranks one at a time, each by what holding it saves on top
	// of those already named (a second slow rank may show only once the
	// first is held), when that stands above the noise measured on the
	// other ranks in the same round. Each must also cost about as much as
	// the costliest named before it.
	var named []int
	// At most half the ranks: slowness shared by most of them is the
	// typical pace, and a rank can stand out only from others left
	// unnamed.
	var first int64
	out.NoiseBoundNS = -1
	for enough && len(named) < min(len(cands), len(rp.ranks)/2) {
		base := hold(named)
		gains := map[int]int64{}
		per := map[int][]int64{}
		best := -1
		for _, r := range cands {
			if slices.Contains(named, r) {
				continue // ranks beyond the candidates save less than any of them
			}
			h := hold(append(slices.Clone(named), r))
			gains[r] = h.saving - base.saving
			per[r] = savedPerWindow(base.res, h.res)
			if best < 0 || gains[r] > gains[best] {
				best = r
			}
		}
		if best < 0 {
			break
		}
		// The noise: what holding each other remaining candidate saves,
		// window by window, once the costliest is held too (the ranks
		// beyond the candidates save less), compared across every rank
		// still unnamed. With the costliest still slow, the others would
		// seem to cost nothing: it is late in every window, whoever else
		// was slow there, and a rank the scheduler happens to run a little
		// less in every window would stand out from a pool of zeros.
		withBest := hold(append(slices.Clone(named), best))
		var pool []int64
		for _, r := range cands {
			if r != best && !slices.Contains(named, r) {
				pool = append(pool, savedPerWindow(withBest.res, hold(append(slices.Clone(named), best, r)).res)...)
			}
		}
		bound := max(noiseBound(pool, len(rp.windows), len(rp.ranks)-len(named), nameConfidence), 0)
		if len(named) == 0 {
			out.NoiseBoundNS = bound
		}
		// A named rank's cost is its saving beyond what holding a rank
		// that is not named saves (the median over them, noise_ns): that
		// is what must stand above the bound.
		var rest []int64
		for _, r := range cands {
			if r != best && !slices.Contains(named, r) {
				rest = append(rest, alone[r])
			}
		}
		why := ""
		switch {
		case gains[best]-median(rest) <= bound:
			why = "within the run's noise"
		case !bigEnough(gains[best]):
			why = fmt.Sprintf("above the run's noise but under %s of the run", units.Percent(nameShare, 0))
		case oneHiccup(per[best], pool, gains[best]):
			why = fmt.Sprintf("above the run's noise, but most of it in one %s, under %d times the longest any other rank cost: one hiccup, as a busy machine has",
				out.Basis, nameHiccup)
		case len(named) > 0 && float64(gains[best]) < nameAlike*float64(first):
			why = "under half what the first straggler costs"
		}
		if why != "" {
			if len(named) == 0 {
				out.Why = why
			}
			break
		}
		first = max(first, gains[best])
		named = append(named, best)
	}
	// Two ranks slow alike hide each other: holding either alone saves
	// little, both a lot, and holding either with any third rank saves
	// little again. With no rank named alone, the pair among the slowest
	// whose holding saves most is named when that is nameRatio times what
	// holding any other pair saves (ranks that share a busy core make
	// pairs too, but not that far above the rest), and each of the two
	// saves more than the noise once the other is held.
	if enough && len(named) == 0 && len(cands) >= 3 && len(rp.ranks) >= 4 { // at most half the ranks
		top := cands[:min(len(cands), pairCandidates)]
		var pairs [][2]int
		for i := range top {
			for j := i + 1; j < len(top); j++ {
				pairs = append(pairs, [2]int{top[i], top[j]})
			}
		}
		slices.SortStableFunc(pairs, func(a, b [2]int) int {
			return cmp.Compare(hold(b[:]).saving, hold(a[:]).saving)
		})
		pair := pairs[0]
		both := hold(pair[:])
		var pool []int64
		for _, r := range cands {
			if r != pair[0] && r != pair[1] {
				pool = append(pool, savedPerWindow(both.res, hold([]int{pair[0], pair[1], r}).res)...)
			}
		}
		bound := max(noiseBound(pool, len(rp.windows), len(rp.ranks)-1, nameConfidence), 0)
		ok := len(pairs) > 1 && float64(both.saving) >= nameRatio*float64(hold(pairs[1][:]).saving)
		for k := range pair {
			g := both.saving - hold([]int{pair[1-k]}).saving
			ok = ok && g > bound && float64(g) >= namePairShare*float64(out.TotalNS)
		}
		if ok {
			named = pair[:]
		}
	}
	// Costs: the named ranks share what holding them all saves (their
	// Shapley values: each one's saving averaged over the orders in which
	// they could be held, so that two ranks that hide each other split
	// what both cost); any other rank's is what holding it alone saves.
	share := map[int]float64{}
	if n := len(named); n > 0 && n <= shapleyRanks {
		for m := 0; m < 1<<n; m++ {
			var set []int
			for i := range n {
				if m&(1<<i) != 0 {
					set = append(set, named[i])
				}
			}
			for i, r := range named {
				if m&(1<<i) == 0 {
					share[r] += shapleyWeight(len(set), n) * float64(hold(append(slices.Clone(set), r)).saving-hold(set).saving)
				}
			}
		}
	}
	// The noise floor: what holding a rank that is not a straggler saves,
	// the median over the others. On a busy machine every rank is slow at
	// times, and holding any rank to the median of the others saves its
	// share of that: a straggler's cost is what it saves beyond it.
	var rest []int64
	for _, r := range rp.ranks {
		if !slices.Contains(named, r) {
			rest = append(rest, alone[r]) // 0 beyond the candidates
		}
	}
	out.NoiseNS = median(rest)
	all := hold(named)
	for _, r := range cands {
		rc := RankCost{Rank: r, ExcessNS: excess[r], AloneNS: alone[r], CostNS: alone[r]}
		if v, ok := share[r]; ok {
			rc.CostNS = max(int64(v)-out.NoiseNS, 0)
		}
		if slices.Contains(named, r) {
			others := slices.DeleteFunc(slices.Clone(named), func(q int) bool { return q == r })
			rc.Windows = countWindows(hold(others).res, all.res)
			// The cost, split in proportion to what holding each part
			// alone saves.
			w, _ := rp.replayParts(r, false, nil, holdWork)
			ws, ts := max(out.TotalNS-w.total(), 0), int64(0)
			if rp.parts&holdTransfers != 0 {
				t, _ := rp.replayParts(r, false, nil, holdTransfers)
				ts = max(out.TotalNS-t.total(), 0)
			}
			if ws+ts > 0 {
				rc.WorkNS = int64(float64(rc.CostNS) * float64(ws) / float64(ws+ts))
				rc.TransferNS = rc.CostNS - rc.WorkNS
			}
		} else {
			rc.Windows = countWindows(actual, hold([]int{r}).res)
		}
		if out.TotalNS > 0 {
			rc.Share = float64(rc.CostNS) / float64(out.TotalNS)
		}
		if n := len(rp.windows); n > 0 {
			rc.PerWindowNS = float64(rc.CostNS) / float64(n)
		} else {
			rc.Windows = 0
		}
		out.Ranks = append(out.Ranks, rc)
	}
	slices.SortStableFunc(out.Ranks, func(a, b RankCost) int { return cmp.Compare(b.CostNS, a.CostNS) })
	out.Named = orEmpty(named)
	out.WithoutNS = winMean
	if len(named) > 0 && len(rp.windows) > 0 {
		// Held, the named ranks lose their share of the noise too: it is
		// given back.
		without, _ := rp.replay(-1, false, named)
		out.WithoutNS = float64(without.windowSpan()+int64(len(named))*out.NoiseNS) / float64(len(rp.windows))
		if out.WithoutNS >= winMean {
			// The windows' span and the run's can differ far (a rank's
			// stream cut, its calls missing from the windows after): the
			// named ranks' costs per window then say what holding them
			// saves, rather than a window longer without them.
			var cost float64
			for _, rc := range out.Ranks {
				if slices.Contains(named, rc.Rank) {
					cost += rc.PerWindowNS
				}
			}
			out.WithoutNS = max(winMean-cost, 0)
		}
	}
	out.CriticalPath = rp.criticalPath(actual)
	return out
}

func (rp *replayer) hasSteps() bool { return rp.steps }

// newReplayer lays out each rank's program operations; nil if there are
// none that involve another rank.
func (s *Summarizer) newReplayer(ranks []*replayRank, calls []callRec, inst [][2]int) *replayer {
	rp := &replayer{calls: calls, inst: inst, instOf: make([]int32, len(calls)), deps: make([]depMode, len(inst)), name: s.str}
	multi := false
	rp.rootMember = make([]int32, len(inst))
	for i, in := range inst {
		rp.rootMember[i] = -1
		for j := in[0]; j < in[1]; j++ {
			rp.instOf[j] = int32(i)
			if rp.rootMember[i] < 0 && calls[j].rank == calls[in[0]].root {
				rp.rootMember[i] = int32(j)
			}
		}
		rp.deps[i] = depOf(s.str(calls[in[0]].name))
		multi = multi || in[1]-in[0] > 1
	}
	world := 0
	for _, rs := range ranks {
		world = max(world, rs.rank+1)
	}
	rp.ops = make([][]rop, world)
	byRank := make([][]int32, world)
	for i, c := range calls {
		byRank[c.rank] = append(byRank[c.rank], int32(i))
	}
	type p2pKey struct {
		comm, from, to int32
		tag            int64
	}
	sends := map[p2pKey][]int32{}
	type recvRef struct {
		key p2pKey
		msg int32
	}
	var recvs []recvRef
	// What names a message's post on every rank (its key) is settled
	// once every rank's messages are known: the k-th post of its kind,
	// communicator and tag where every rank that posts such messages
	// posts as many, else (a stencil's edge ranks have fewer neighbours,
	// all on one tag) its place in the rank's k-th completion call.
	type msgKeyInfo struct {
		fam  [3]int64 // kind, communicator, tag
		occ  int64    // k-th of its family on its rank
		call int64    // its completion call's place on its rank
		j    int64    // its place among its family in that call
	}
	var msgInfo []msgKeyInfo
	keys := map[[4]int64]int32{}
	keyOf := func(a, b, c, d int64) int32 {
		k := [4]int64{a, b, c, d}
		if id, ok := keys[k]; ok {
			return id
		}
		id := int32(len(keys))
		keys[k] = id
		return id
	}
	steps := map[int32]bool{}
	for _, rs := range ranks {
		r := rs.rank
		var ops []rop
		waitOf := map[[2]int64]waitRec{}
		for _, w := range rs.waits {
			if w.name != s.p2p { // a message's wait: its seq is a tag
				waitOf[[2]int64{int64(w.comm), w.seq}] = w
			}
		}
		for _, ci := range byRank[r] {
			c := calls[ci]
			in := rp.instOf[ci]
			if w, ok := waitOf[[2]int64{int64(c.comm), c.seq}]; ok && c.nonBlocking {
				ops = append(ops, rop{kind: opStart, start: c.start, end: c.start, call: ci, key: keyOf(1, int64(c.comm), c.seq, 0)})
				ops = append(ops, rop{kind: opWait, start: w.start, end: w.end, call: ci, key: keyOf(2, int64(c.comm), c.seq, 0)})
				_ = in
				continue
			}
			ops = append(ops, rop{kind: opBlock, start: c.start, end: c.start + c.dur, call: ci, key: keyOf(3, int64(c.comm), c.seq, 0)})
		}
		// Messages, in the order the program posted them. A message the
		// program waited for with a wait event (Isend, Irecv) is completed
		// by that wait; a blocking one by its own call. The messages one
		// call completed (a Waitall's, a Sendrecv's) are one operation.
		pw := map[p2pWaitKey][]waitRec{}
		for _, w := range rs.waits {
			if w.name == s.p2p {
				k := p2pWaitKey{w.comm, w.peer, w.seq, w.bytes, w.end}
				pw[k] = append(pw[k], w)
			}
		}
		mine := rs.p2pMsgs // the replay's own copy
		slices.SortStableFunc(mine, func(a, b p2pRec) int { return cmp.Compare(a.start, b.start) })
		type span2 struct{ start, end int64 }
		groups := map[span2][]int32{}
		var order []span2
		occ := map[[3]int64]int64{}
		groupAt := map[span2]int{}
		inCall := map[[4]int64]int64{}
		for _, m := range mine {
			if int(m.peer) == r {
				continue // a local copy: own work
			}
			msg := int32(len(rp.msgs))
			mr := msgRec{send: m.send, rank: int32(r), post: m.start, wait: m.start, first: m.start + m.wait, end: m.end}
			if l := pw[p2pWaitKey{m.comm, m.peer, m.tag, m.bytes, m.end}]; len(l) > 0 {
				mr.nonBlocking, mr.wait = true, max(min(l[0].start, m.end), m.start)
				pw[p2pWaitKey{m.comm, m.peer, m.tag, m.bytes, m.end}] = l[1:]
			}
			rp.msgs = append(rp.msgs, mr)
			kind := int64(5)
			if m.send {
				kind = 4
				k := p2pKey{m.comm, int32(r), m.peer, m.tag}
				sends[k] = append(sends[k], msg)
			} else {
				recvs = append(recvs, recvRef{p2pKey{m.comm, m.peer, int32(r), m.tag}, msg})
			}
			fam := [3]int64{kind, int64(m.comm), m.tag}
			g := span2{mr.wait, mr.end}
			gi, seen := groupAt[g]
			if !seen {
				gi = len(order)
				groupAt[g] = gi
				order = append(order, g)
			}
			groups[g] = append(groups[g], msg)
			in := [4]int64{int64(gi), kind, int64(m.comm), m.tag}
			msgInfo = append(msgInfo, msgKeyInfo{fam: fam, occ: occ[fam], call: int64(gi), j: inCall[in]})
			occ[fam]++
			inCall[in]++
			ops = append(ops, rop{kind: opPost, start: m.start, end: m.start, call: msg, key: -1, win: -1})
		}
		for _, g := range order {
			gi := int32(len(rp.groups))
			rp.groups = append(rp.groups, groups[g])
			ops = append(ops, rop{kind: opMWait, start: g.start, end: g.end, call: gi, key: -1, win: -1})
		}
		if len(ops) == 0 {
			continue
		}
		for _, st := range rs.steps {
			steps[st.step] = true
			ops = append(ops, rop{kind: opMark, start: st.start, end: st.start, call: 2 * st.step, key: keyOf(6, int64(st.step), 0, 0)})
			ops = append(ops, rop{kind: opMark, start: st.end, end: st.end, call: 2*st.step + 1, key: keyOf(7, int64(st.step), 0, 0)})
		}
		slices.SortStableFunc(ops, func(a, b rop) int { return cmp.Compare(a.start, b.start) })
		if testedWaits(ops) {
			// A moved wait starts where the last operation before it
			// did (a post): after it.
			slices.SortStableFunc(ops, func(a, b rop) int {
				return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(isWait(a), isWait(b)))
			})
		}
		rp.ops[r] = ops
		rp.ranks = append(rp.ranks, r)
		multi = multi || len(rs.p2pMsgs) > 0
	}
	if !multi || len(rp.ranks) < 2 {
		return nil
	}
	// The messages' keys: by family where every rank posts as many of it.
	famCount := map[[3]int64]map[int32]int64{}
	for m, in := range msgInfo {
		if famCount[in.fam] == nil {
			famCount[in.fam] = map[int32]int64{}
		}
		famCount[in.fam][rp.msgs[m].rank]++
	}
	aligned := map[[3]int64]bool{}
	for fam, byRank := range famCount {
		aligned[fam] = true
		var n int64 = -1
		for _, c := range byRank {
			if n >= 0 && c != n {
				aligned[fam] = false
			}
			n = c
		}
	}
	msgKey := make([]int32, len(msgInfo))
	for _, r := range rp.ranks {
		for i, o := range rp.ops[r] {
			if o.kind != opPost {
				continue
			}
			in := msgInfo[o.call]
			if aligned[in.fam] {
				msgKey[o.call] = keyOf(in.fam[0], in.fam[1], in.fam[2], in.occ)
			} else {
				msgKey[o.call] = keyOf(in.fam[0]+10, in.fam[1], in.fam[2], in.call<<24|in.j)
			}
			rp.ops[r][i].key = msgKey[o.call]
		}
	}
	for _, r := range rp.ranks {
		for i, o := range rp.ops[r] {
			if o.kind == opMWait {
				rp.ops[r][i].key = keyOf(8, int64(msgKey[rp.groups[o.call][0]]), 0, 0)
			}
		}
	}
	// Messages: the k-th receive posted from a peer with a tag on a
	// communicator got the k-th send posted (MPI's messages do not
	// overtake each other).
	rp.nmsg = len(rp.msgs)
	rp.msgFrom = make([]int32, rp.nmsg)
	rp.lagOf = make([]int64, rp.nmsg)
	rp.sendTo = make([]int32, rp.nmsg)
	for i := range rp.msgFrom {
		rp.msgFrom[i], rp.sendTo[i] = -1, -1
	}
	used := map[p2pKey]int{}
	for _, rv := range recvs {
		l := sends[rv.key]
		k := used[rv.key]
		if k >= len(l) {
			continue
		}
		used[rv.key] = k + 1
		snd := l[k]
		rp.msgFrom[rv.msg] = snd
		sm, rm := rp.msgs[snd], rp.msgs[rv.msg]
		// No byte arrived before the send was posted. When the receiver
		// is known to have waited (its wait_ns), its first byte came this
		// long after the send's post. When the message was there first,
		// the post says only how late the receiver came, not how long the
		// message took: no longer than its blocking send (a non-blocking
		// send's end says nothing of it).
		first := max(rm.first, sm.post)
		lag := first - sm.post
		if rm.first <= rm.post && sm.post < rm.post {
			// A blocking send that ended before the receiver posted was
			// buffered: its message was there by its end. One still going
			// when the receiver posted (synchronous, too large to buffer)
			// waited for the receiver, and its time is not the message's.
			lag = 0
			if !sm.nonBlocking && sm.end <= rm.post {
				lag = sm.end - sm.post
			}
		}
		rp.lagOf[rv.msg] = lag
		// A send that waited for its receiver: a blocking one still going
		// when the receiver posted, a non-blocking one whose wait ended
		// after the receiver posted during it.
		if (!sm.nonBlocking && rm.post < sm.end) || (sm.nonBlocking && rm.post > sm.wait && rm.post <= sm.end) {
			rp.sendTo[snd] = rv.msg
		}
	}
	// Own work before each operation, and the recorded tails.
	for _, r := range rp.ranks {
		ops := rp.ops[r]
		release := ops[0].start
		for i := range ops {
			o := &ops[i]
			o.gap = max(o.start-release, 0)
			switch o.kind {
			case opStart, opPost, opMark:
				release = max(release, o.start)
			default:
				release = max(release, o.end)
			}
		}
	}
	// A member that completed before the members it would wait for had
	// arrived did not wait for them (a call that moves no data, a root's
	// own part): it is replayed on its own.
	free := make([]bool, len(calls))
	anyFree := false
	for j, c := range calls {
		if c.untimed {
			continue
		}
		if l := rp.lastArrival(int(rp.instOf[j]), c.rank, func(k int) int64 { return calls[k].start }); c.start+c.dur < l {
			free[j], anyFree = true, true
		}
	}
	if anyFree {
		rp.free = free
	}
	// Collective tails: the time after the last member arrived; a
	// message wait's, after its messages completed.
	for _, r := range rp.ranks {
		ops := rp.ops[r]
		for i := range ops {
			o := &ops[i]
			switch o.kind {
			case opMWait:
				var comp int64
				for _, m := range rp.groups[o.call] {
					comp = max(comp, rp.recordedCompletion(m))
				}
				o.tail = max(o.end-max(o.start, comp), 0)
			case opBlock, opStart:
				c := calls[o.call]
				l := rp.lastArrival(int(rp.instOf[o.call]), c.rank, func(j int) int64 { return calls[j].start })
				o.tail = max(c.start+c.dur-max(l, c.start), 0)
			case opWait:
				c := calls[o.call]
				o.tail = max(o.end-max(o.start, c.start+c.dur), 0)
			}
		}
	}
	// Waits with one span are one completion call (a Waitall of a
	// collective's request and messages): each ends once its own part
	// completed, and the last takes the call's time after all of them
	// completed, so that holding the rank any of them waited for
	// shortens the call.
	for _, r := range rp.ranks {
		ops := rp.ops[r]
		for i := 0; i < len(ops); {
			j := i + 1
			for j < len(ops) && isWait(ops[i]) == 1 && isWait(ops[j]) == 1 && ops[j].start == ops[i].start && ops[j].end == ops[i].end {
				j++
			}
			if j-i > 1 {
				var comp int64
				for k := i; k < j; k++ {
					comp = max(comp, rp.opCompletion(ops[k]))
				}
				for k := i; k < j-1; k++ {
					ops[k].tail = 0
				}
				ops[j-1].tail = max(ops[j-1].end-max(ops[j-1].start, comp), 0)
			}
			i = j
		}
	}
	rp.callTail = make([]int64, len(calls))
	rp.opAt = make([]int32, len(calls))
	rp.msgAt = make([][2]int32, rp.nmsg)
	for _, r := range rp.ranks {
		for i, o := range rp.ops[r] {
			switch o.kind {
			case opBlock, opStart:
				rp.callTail[o.call] = o.tail
				rp.opAt[o.call] = int32(i)
			case opPost:
				rp.msgAt[o.call] = [2]int32{int32(r), int32(i)}
			}
		}
	}
	// The typical own work of each operation: the median over the ranks
	// that have it.
	gaps := make([][]int64, len(keys))
	for _, r := range rp.ranks {
		for _, o := range rp.ops[r] {
			gaps[o.key] = append(gaps[o.key], o.gap)
		}
	}
	tails := make([][]int64, len(keys))
	for _, r := range rp.ranks {
		for _, o := range rp.ops[r] {
			if o.kind != opMark {
				tails[o.key] = append(tails[o.key], o.tail)
			}
		}
	}
	rp.typical = medians(gaps)
	rp.typTail = medians(tails)
	// Each member's own time in a transfer: its tail less its waits for
	// the others' messages after the last arrival (its message waits less
	// the time it waited for the others to arrive at all).
	rp.waitIn = make([]int64, len(calls))
	rp.ownExcess = make([]int64, len(calls))
	own := make([]int64, len(calls))
	has := make([]bool, len(calls))
	for _, r := range rp.ranks {
		for _, o := range rp.ops[r] {
			if o.kind != opBlock && o.kind != opStart {
				continue
			}
			c := calls[o.call]
			l := rp.lastArrival(int(rp.instOf[o.call]), c.rank, func(j int) int64 { return calls[j].start })
			w := min(max(c.recvWait-max(l-c.start, 0), 0), o.tail)
			rp.waitIn[o.call], own[o.call], has[o.call] = w, o.tail-w, true
		}
	}
	for _, in := range inst {
		var os []int64
		for j := in[0]; j < in[1]; j++ {
			if has[j] {
				os = append(os, own[j])
			}
		}
		if len(os) < 2 {
			continue // nothing to compare with
		}
		slices.Sort(os)
		typ := os[(len(os)-1)/2]
		for j := in[0]; j < in[1]; j++ {
			if has[j] {
				rp.ownExcess[j] = max(own[j]-typ, 0)
			}
		}
	}
	// Windows: steps, or else the operations every rank completes in
	// the same place of the program: world collectives, and waits for
	// messages that every rank makes (a halo exchange's Waitall).
	for _, r := range rp.ranks {
		for i := range rp.ops[r] {
			rp.ops[r][i].win = -1
		}
	}
	rp.steps = len(steps) > 0
	if len(steps) > 0 {
		for st := range steps {
			rp.windows = append(rp.windows, windowRef{id: int(st)})
		}
		slices.SortFunc(rp.windows, func(a, b windowRef) int { return cmp.Compare(a.id, b.id) })
		idx := map[int]int32{}
		for i, w := range rp.windows {
			idx[w.id] = int32(i)
		}
		for _, r := range rp.ranks {
			for i, o := range rp.ops[r] {
				if o.kind == opMark && o.call%2 == 1 {
					rp.ops[r][i].win = idx[int(o.call/2)]
				}
			}
		}
		return rp
	}
	// A window is named by its instance (collectives) or by its key
	// (message waits: the same key on every rank).
	type winKey struct {
		inst int
		key  int32
	}
	ranksOf := map[winKey]int{}
	at := map[winKey]int64{}
	keyOfOp := func(o rop) (winKey, bool) {
		switch o.kind {
		case opBlock, opWait:
			in := int(rp.instOf[o.call])
			if rp.inst[in][1]-rp.inst[in][0] == len(rp.ranks) && !calls[o.call].untimed {
				return winKey{inst: in, key: -1}, true
			}
		case opMWait:
			return winKey{inst: -1, key: o.key}, true
		}
		return winKey{}, false
	}
	for _, r := range rp.ranks {
		for _, o := range rp.ops[r] {
			if k, ok := keyOfOp(o); ok {
				ranksOf[k]++
				if t, seen := at[k]; !seen || o.end < t {
					at[k] = o.end
				}
			}
		}
	}
	var wins []winKey
	for k, n := range ranksOf {
		if k.inst >= 0 || n == len(rp.ranks) {
			wins = append(wins, k)
		}
	}
	slices.SortFunc(wins, func(a, b winKey) int {
		return cmp.Or(cmp.Compare(at[a], at[b]), cmp.Compare(a.inst, b.inst), cmp.Compare(a.key, b.key))
	})
	idx := map[winKey]int32{}
	for i, k := range wins {
		idx[k] = int32(i)
		id := k.inst
		if id < 0 {
			id = i
		}
		rp.windows = append(rp.windows, windowRef{id: id})
	}
	for _, r := range rp.ranks {
		for i, o := range rp.ops[r] {
			if k, ok := keyOfOp(o); ok {
				if w, ok := idx[k]; ok {
					rp.ops[r][i].win = w
				}
			}
		}
	}
	return rp
}

func isWait(o rop) int {
	if o.kind == opWait || o.kind == opMWait {
		return 1
	}
	return 0
}

// testedWaits moves the start of each wait that the program polled (a
// wait event starts at the first MPI_Test that found its request
// unfinished) past the operations the rank did between its tests: it
// blocked on the request only after the last of them, if at all. It
// reports whether any moved. ops are in order of start.
func testedWaits(ops []rop) bool {
	// scan bounds the operations looked at past one wait; a request
	// polled across more than that is taken as not waited for at all.
	const scan = 1 << 12
	moved := false
	for i := range ops {
		o := &ops[i]
		if o.kind != opWait && o.kind != opMWait {
			continue
		}
		eff := o.start
		j := i + 1
		for ; j < len(ops) && j-i <= scan && ops[j].start < o.end; j++ {
			if isWait(ops[j]) == 1 && ops[j].start == o.start && ops[j].end == o.end {
				continue // one completion call's other requests (a Waitall's)
			}
			switch ops[j].kind {
			case opStart, opPost, opMark:
				eff = max(eff, ops[j].start)
			default:
				if ops[j].end <= o.end {
					eff = max(eff, ops[j].end)
				}
			}
		}
		if j-i > scan {
			eff = o.end
		}
		if eff != o.start {
			o.start, moved = min(eff, o.end), true
		}
	}
	return moved
}

// opCompletion is when what a wait operation waited for completed, as
// recorded.
func (rp *replayer) opCompletion(o rop) int64 {
	if o.kind == opWait {
		c := rp.calls[o.call]
		return c.start + c.dur
	}
	var comp int64
	for _, m := range rp.groups[o.call] {
		comp = max(comp, rp.recordedCompletion(m))
	}
	return comp
}

// recordedCompletion is when message m completed as recorded, as the
// replay computes it: a receive once posted and its first byte arrived,
// a send once posted, and once its receiver posted if it waited for it.
func (rp *replayer) recordedCompletion(m int32) int64 {
	mr := rp.msgs[m]
	if mr.send {
		if rv := rp.sendTo[m]; rv >= 0 {
			return max(mr.post, rp.msgs[rv].post)
		}
		return mr.post
	}
	if src := rp.msgFrom[m]; src >= 0 {
		return max(mr.post, rp.msgs[src].post+rp.lagOf[m])
	}
	return max(mr.first, mr.post)
}

// completion is when message m completes in a replay, given the
// replayed posts; ok is false while a post it needs is not replayed yet.
// dep is the message on another rank whose post set it, -1 if its own.
func (rp *replayer) completion(m int32, sent, posted []int64) (at int64, dep int32, ok bool) {
	const unknown = int64(-1 << 62)
	mr := rp.msgs[m]
	if mr.send {
		if rv := rp.sendTo[m]; rv >= 0 {
			if posted[rv] == unknown {
				return 0, -1, false
			}
			if posted[rv] > sent[m] {
				return posted[rv], rv, true
			}
		}
		return sent[m], -1, true
	}
	src := rp.msgFrom[m]
	if src < 0 {
		return posted[m] + max(mr.first-mr.post, 0), -1, true
	}
	if sent[src] == unknown {
		return 0, -1, false
	}
	if a := sent[src] + rp.lagOf[m]; a > posted[m] {
		return a, src, true
	}
	return posted[m], -1, true
}

// groupCompletion is when the messages of group g have all completed in
// a replay, and the message on another rank that set it (-1 if none).
func (rp *replayer) groupCompletion(g int32, sent, posted []int64) (int64, int32, bool) {
	at, dep := int64(-1<<62), int32(-1)
	for _, m := range rp.groups[g] {
		c, d, ok := rp.completion(m, sent, posted)
		if !ok {
			return 0, -1, false
		}
		if c > at {
			at, dep = c, d
		}
	}
	return at, dep, true
}

// median returns the lower median of v (0 for none); it sorts v.
func median(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[(len(v)-1)/2]
}

// medians returns the median of each list, or -1 for a list of fewer
// than two (nothing to compare with: never idealized). It sorts the lists.
func medians(lists [][]int64) []int64 {
	out := make([]int64, len(lists))
	for k, g := range lists {
		if len(g) < 2 {
			out[k] = -1
			continue
		}
		slices.Sort(g)
		out[k] = g[(len(g)-1)/2]
	}
	return out
}

// lastArrival is the latest arrival among the members call instance in
// waits for on behalf of rank r, given each member's arrival.
func (rp *replayer) lastArrival(in int, r int32, arrive func(j int) int64) int64 {
	lo, hi := rp.inst[in][0], rp.inst[in][1]
	if rp.free != nil {
		for j := lo; j < hi; j++ {
			if rp.calls[j].rank == r && rp.free[j] {
				return arrive(j)
			}
		}
	}
	switch rp.deps[in] {
	case depNone:
		for j := lo; j < hi; j++ {
			if rp.calls[j].rank == r {
				return arrive(j)
			}
		}
	case depRoot:
		root := rp.calls[lo].root
		for j := lo; j < hi; j++ {
			if rp.calls[j].rank == root {
				return arrive(j)
			}
		}
	case depToRoot:
		if rp.calls[lo].root != r {
			for j := lo; j < hi; j++ {
				if rp.calls[j].rank == r {
					return arrive(j)
				}
			}
		}
	}
	l := int64(-1 << 62)
	for j := lo; j < hi; j++ {
		l = max(l, arrive(j))
	}
	return l
}

// excess sums, per rank, its own work beyond the typical, and its tails
// beyond the other members' of the same calls.
func (rp *replayer) excess() map[int]int64 {
	out := map[int]int64{}
	for _, r := range rp.ranks {
		for _, o := range rp.ops[r] {
			if t := rp.typical[o.key]; t >= 0 && o.gap > t {
				out[r] += o.gap - t
			}
			switch o.kind {
			case opBlock, opStart:
				out[r] += rp.ownExcess[o.call]
			case opMark:
			default:
				if t := rp.typTail[o.key]; t >= 0 && o.tail > t {
					out[r] += o.tail - t
				}
			}
		}
	}
	return out
}

// replayResult is one replay: each rank's operations' replayed ends.
type replayResult struct {
	ends   [][]int64 // by rank, by op
	starts [][]int64
	err    int64 // largest |replayed - recorded| end (only for the as-recorded replay)
	rp     *replayer
	// why[r][i] says what set op i's start: -1 its own work, else the
	// call index (or message) it waited for, with whyRank the rank.
	whyRank [][]int32
	whyOp   [][]int32
}

func (res *replayResult) total() int64 {
	var first, last int64
	firstSet := false
	for _, r := range res.rp.ranks {
		ops := res.rp.ops[r]
		if len(ops) == 0 {
			continue
		}
		if !firstSet || res.starts[r][0] < first {
			first, firstSet = res.starts[r][0], true
		}
		last = max(last, res.ends[r][len(ops)-1])
	}
	return last - first
}

// windowEnds returns, per window, the latest replayed end of its closing
// mark (steps) or call (calls) over the ranks.
func (res *replayResult) windowEnds() []int64 {
	rp := res.rp
	out := make([]int64, len(rp.windows))
	for _, r := range rp.ranks {
		for i, o := range rp.ops[r] {
			if o.win >= 0 {
				out[o.win] = max(out[o.win], res.ends[r][i])
			}
		}
	}
	return out
}

// windowSpan is the time from the first window's start to the last one's
// end, replayed.
func (res *replayResult) windowSpan() int64 {
	ends := res.windowEnds()
	if len(ends) == 0 {
		return 0
	}
	first := ends[0]
	// The first window starts where the ranks started it.
	rp := res.rp
	start := int64(1 << 62)
	for _, r := range rp.ranks {
		for i, o := range rp.ops[r] {
			if o.kind == opMark && o.call%2 == 0 && int(o.call/2) == rp.windows[0].id {
				start = min(start, res.starts[r][i])
			}
		}
	}
	if start == 1<<62 {
		start = first - (ends[len(ends)-1]-first)/int64(max(len(ends)-1, 1))
	}
	return ends[len(ends)-1] - start
}

// savedPerWindow returns how much sooner each window ended in b than in
// a, less what the windows before it had already saved.
func savedPerWindow(a, b *replayResult) []int64 {
	ea, eb := a.windowEnds(), b.windowEnds()
	out := make([]int64, len(ea))
	var prev int64
	for i := range ea {
		d := ea[i] - eb[i]
		out[i] = d - prev
		prev = d
	}
	return out
}

// replay runs the program with each operation's own work as recorded,
// except: rank ideal's (or every rank's, if all) held to the typical, and
// the ranks in fixed too. ok is false if the dependencies never resolve.
func (rp *replayer) replay(ideal int, all bool, fixed []int) (*replayResult, bool) {
	return rp.replayParts(ideal, all, fixed, rp.parts)
}

// heldParts says which parts of a held rank's program are held to the
// typical: its own work between operations, its own part of transfers.
type heldParts uint8

const (
	holdWork heldParts = 1 << iota
	holdTransfers
)

// replayParts replays as replay does, holding only the parts given.
func (rp *replayer) replayParts(ideal int, all bool, fixed []int, parts heldParts) (*replayResult, bool) {
	world := len(rp.ops)
	res := &replayResult{rp: rp, ends: make([][]int64, world), starts: make([][]int64, world),
		whyRank: make([][]int32, world), whyOp: make([][]int32, world)}
	idealize := make([]bool, world)
	for _, r := range fixed {
		idealize[r] = true
	}
	if ideal >= 0 {
		idealize[ideal] = true
	}
	// A held member's own excess in a transfer is taken from it, and from
	// every other member as far as it waited for the others' messages.
	heldEx := make([]int64, len(rp.inst))
	for _, r := range rp.ranks {
		if !all && !idealize[r] || parts&holdTransfers == 0 {
			continue
		}
		for _, o := range rp.ops[r] {
			if o.kind == opBlock || o.kind == opStart {
				in := rp.instOf[o.call]
				heldEx[in] = max(heldEx[in], rp.ownExcess[o.call])
			}
		}
	}
	callTail := func(r int, call int32, tail int64) int64 {
		if (all || idealize[r]) && parts&holdTransfers != 0 {
			return max(tail-rp.ownExcess[call], 0)
		}
		return tail - min(heldEx[rp.instOf[call]], rp.waitIn[call])
	}
	const unknown = int64(-1 << 62)
	arrive := make([]int64, len(rp.calls)) // replayed arrival at each call
	done := make([]int64, len(rp.calls))   // replayed completion on its rank
	for i := range arrive {
		arrive[i], done[i] = unknown, unknown
	}
	// Per instance, how many members have arrived and which arrived
	// last (the first of equals), so that a member's completion is found
	// without looking at every other member: a 512-rank collective would
	// otherwise cost 512² looks per replay.
	ar := &arrivals{count: make([]int32, len(rp.inst)), last: make([]int32, len(rp.inst))}
	for i := range ar.last {
		ar.last[i] = -1
	}
	arriveAt := func(call int32, t int64) {
		if arrive[call] != unknown {
			return // an operation retried once what it waits for is known: it arrived at the same time
		}
		arrive[call] = t
		in := rp.instOf[call]
		ar.count[in]++
		if l := ar.last[in]; l < 0 || t > arrive[l] || (t == arrive[l] && call < l) {
			ar.last[in] = call
		}
	}
	sent := make([]int64, rp.nmsg)   // replayed send start
	posted := make([]int64, rp.nmsg) // replayed receive post
	for i := range sent {
		sent[i], posted[i] = unknown, unknown
	}
	cursor := make([]int64, world)
	next := make([]int, world)
	for _, r := range rp.ranks {
		n := len(rp.ops[r])
		res.ends[r], res.starts[r] = make([]int64, n), make([]int64, n)
		res.whyRank[r], res.whyOp[r] = make([]int32, n), make([]int32, n)
		cursor[r] = rp.ops[r][0].start
	}
	remaining := 0
	for _, r := range rp.ranks {
		remaining += len(rp.ops[r])
	}
	for remaining > 0 {
		progress := false
		for _, r := range rp.ranks {
			ops := rp.ops[r]
			for next[r] < len(ops) {
				i := next[r]
				o := ops[i]
				gap, tail := o.gap, o.tail
				held := all || idealize[r]
				if held && parts&holdWork != 0 && rp.typical[o.key] >= 0 {
					gap = min(gap, rp.typical[o.key])
				}
				switch {
				case o.kind == opBlock:
					tail = callTail(r, o.call, tail)
				case held && parts&holdTransfers != 0 && rp.typTail[o.key] >= 0 && o.kind != opStart:
					tail = min(tail, rp.typTail[o.key])
				}
				t := cursor[r] + gap
				why, whyR := int32(-1), int32(r)
				var end int64
				switch o.kind {
				case opStart:
					arriveAt(o.call, t)
					end = t
				case opMark:
					end = t
				case opPost:
					if rp.msgs[o.call].send {
						sent[o.call] = t
					} else {
						posted[o.call] = t
					}
					end = t
				case opMWait:
					comp, dep, ok := rp.groupCompletion(o.call, sent, posted)
					if !ok {
						goto blocked
					}
					if comp > t && dep >= 0 {
						why, whyR = dep, -2
					}
					end = max(t, comp) + tail
				case opBlock:
					arriveAt(o.call, t)
					l, ok := rp.resolve(o.call, arrive, ar)
					if !ok {
						goto blocked
					}
					if l > t {
						why, whyR = rp.latest(o.call, ar)
					}
					end = max(l, t) + tail
					done[o.call] = end
				case opWait:
					l, ok := rp.resolve(o.call, arrive, ar)
					if !ok {
						goto blocked
					}
					// The call's own replayed completion on this rank.
					c := rp.calls[o.call]
					a := arrive[o.call]
					comp := max(l, a) + callTail(r, o.call, rp.callTail[o.call])
					done[o.call] = comp
					if comp > t {
						why, whyR = rp.latest(o.call, ar)
						if l <= a {
							why, whyR = o.call, int32(c.rank)
						}
					}
					end = max(t, comp) + tail
				}
				res.starts[r][i], res.ends[r][i] = t, end
				res.whyOp[r][i], res.whyRank[r][i] = why, whyR
				if o.kind == opStart || o.kind == opMark || o.kind == opPost {
					cursor[r] = max(cursor[r], t)
				} else {
					cursor[r] = max(cursor[r], end)
				}
				if !all && ideal < 0 && len(fixed) == 0 {
					if d := end - o.end; d > res.err {
						res.err = d
					} else if -d > res.err {
						res.err = -d
					}
				}
				next[r]++
				remaining--
				progress = true
				continue
			blocked:
				break
			}
		}
		if !progress {
			return res, false
		}
	}
	return res, true
}

// arrivals are, in one replay, how many members of each instance have
// arrived, and which arrived last.
type arrivals struct {
	count []int32
	last  []int32 // call index, -1 before any
}

// resolve returns the arrival call's completion waits for, once known:
// as lastArrival, from what the replay has seen arrive so far.
func (rp *replayer) resolve(call int32, arrive []int64, ar *arrivals) (int64, bool) {
	const unknown = int64(-1 << 62)
	in := rp.instOf[call]
	lo, hi := rp.inst[in][0], rp.inst[in][1]
	if rp.free != nil && rp.free[call] {
		return arrive[call], arrive[call] != unknown
	}
	all := func() (int64, bool) {
		if int(ar.count[in]) < hi-lo {
			return 0, false
		}
		return arrive[ar.last[in]], true
	}
	switch rp.deps[in] {
	case depNone:
		return arrive[call], arrive[call] != unknown
	case depRoot:
		if j := rp.rootMember[in]; j >= 0 {
			return arrive[j], arrive[j] != unknown
		}
	case depToRoot:
		if rp.calls[lo].root != rp.calls[call].rank {
			return arrive[call], arrive[call] != unknown
		}
	}
	return all()
}

// latest returns the call (and its rank) of the member that arrived last
// at call's instance, of those that have arrived.
func (rp *replayer) latest(call int32, ar *arrivals) (int32, int32) {
	best := ar.last[rp.instOf[call]]
	if best < 0 {
		best = call
	}
	return best, rp.calls[best].rank
}

// criticalPath walks back from the end of the slowest window of the
// as-recorded replay to its start, following what each operation waited
// for: its own rank's work, the last member of a collective, the sender
// of a message.
func (rp *replayer) criticalPath(res *replayResult) *CriticalPath {
	if len(rp.windows) == 0 {
		return nil
	}
	ends := res.windowEnds()
	// The slowest window, and where it started: for steps, the steps
	// table's slowest (the longest mean over the ranks of their time in
	// the step), from its first rank's start; else the window that took
	// longest after the one before it.
	best, bestLen := -1, int64(-1)
	var startAt int64
	if rp.steps {
		sum := make([]int64, len(rp.windows))
		n := make([]int64, len(rp.windows))
		first := make([]int64, len(rp.windows))
		idx := map[int]int{}
		for i, w := range rp.windows {
			idx[w.id] = i
			first[i] = math.MaxInt64
		}
		for _, r := range rp.ranks {
			open := map[int]int64{}
			for k, o := range rp.ops[r] {
				if o.kind != opMark {
					continue
				}
				w, ok := idx[int(o.call/2)]
				if !ok {
					continue
				}
				if o.call%2 == 0 {
					open[w] = res.starts[r][k]
					first[w] = min(first[w], res.starts[r][k])
				} else if st, ok := open[w]; ok {
					sum[w] += res.ends[r][k] - st
					n[w]++
				}
			}
		}
		for w := range rp.windows {
			if n[w] > 0 && sum[w]/n[w] > bestLen && first[w] < ends[w] {
				best, bestLen = w, sum[w]/n[w]
			}
		}
		if best >= 0 {
			startAt = first[best]
		}
	} else {
		for w := range ends {
			if w == 0 {
				continue
			}
			if d := ends[w] - ends[w-1]; d > bestLen {
				best, bestLen = w, d
			}
		}
		if best >= 0 {
			startAt = ends[best-1]
		}
	}
	if best < 0 {
		return nil
	}
	// The rank that ended the window last, and its closing operation.
	r, i := -1, -1
	for _, q := range rp.ranks {
		for k, o := range rp.ops[q] {
			if int(o.win) == best && res.ends[q][k] == ends[best] {
				r, i = q, k
			}
		}
	}
	if r < 0 {
		return nil
	}
	cp := &CriticalPath{Window: rp.windows[best].id, StartNS: startAt, EndNS: ends[best], ByRank: map[int]int64{}}
	add := func(rank int, kind, what string, lo, hi int64) {
		lo = max(lo, startAt)
		if hi <= lo {
			return
		}
		cp.Segments = append(cp.Segments, PathSegment{Rank: rank, Kind: kind, What: what, StartNS: lo, EndNS: hi})
		if kind == "work" {
			cp.ByRank[rank] += hi - lo
		} else {
			cp.CommNS += hi - lo
		}
	}
	for steps := 0; i >= 0 && steps < 1<<20; steps++ {
		o := rp.ops[r][i]
		t, e := res.starts[r][i], res.ends[r][i]
		if e <= startAt {
			break
		}
		what := rp.describe(o)
		switch why := res.whyOp[r][i]; {
		case why >= 0 && (o.kind == opBlock || o.kind == opWait):
			// Waited for the last member of a collective to arrive.
			q := int(res.whyRank[r][i])
			j := int(rp.opAt[why])
			arr := res.starts[q][j]
			add(r, "comm", what, max(arr, t), e)
			if q == r && j == i {
				add(r, "work", "before "+what, t-o.gap, t)
				i--
				continue
			}
			r, i = q, j
			// Continue at the late member's arrival: its own work before it.
			oo := rp.ops[r][i]
			add(r, "work", "before "+rp.describe(oo), res.starts[r][i]-oo.gap, res.starts[r][i])
			i--
		case why >= 0 && o.kind == opMWait:
			// A message waited for its sender, or a send for its receiver.
			at := rp.msgAt[why]
			add(r, "comm", what, res.starts[int(at[0])][int(at[1])], e)
			r, i = int(at[0]), int(at[1])
			oo := rp.ops[r][i]
			add(r, "work", "before "+rp.describe(oo), res.starts[r][i]-oo.gap, res.starts[r][i])
			i--
		default:
			if e > t && o.kind != opMark && o.kind != opStart {
				add(r, "comm", what, t, e)
			}
			add(r, "work", "before "+what, t-o.gap, t)
			i--
		}
	}
	slices.Reverse(cp.Segments)
	return cp
}

// describe names an operation for a critical path.
func (rp *replayer) describe(o rop) string {
	switch o.kind {
	case opMark:
		if o.call%2 == 1 {
			return "end of step " + itoa(int64(o.call/2))
		}
		return "start of step " + itoa(int64(o.call/2))
	case opPost:
		m := rp.msgs[o.call]
		if m.send {
			return "send posted"
		}
		return "receive posted"
	case opMWait:
		if n := len(rp.groups[o.call]); n > 1 {
			return "wait for " + itoa(int64(n)) + " messages"
		}
		if rp.msgs[rp.groups[o.call][0]].send {
			return "send"
		}
		return "receive"
	}
	c := rp.calls[o.call]
	name := "collective"
	if rp.name != nil {
		name = rp.name(c.name)
	}
	s := name + " #" + itoa(c.seq)
	if o.kind == opWait {
		s = "wait for " + s
	}
	return s
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// perCall finds stragglers call by call, for runs whose calls do not
// depend on each other through a program the replay can follow: a rank's
// cost is how much later the calls it came last to completed than they
// would have had it arrived with the next latest rank. How that splits
// between its own work and its transfers is not known (SplitKnown).
func perCall(calls []callRec, inst [][2]int) Stragglers {
	out := Stragglers{Replayed: true, Basis: "call", Ranks: []RankCost{}, Named: []int{}, Confidence: nameConfidence,
		Reason: "the ranks' calls do not form one program that can be replayed (a rank's stream was cut, or the ranks joined calls in orders no program makes), " +
			"so each call is judged on its own: a rank's cost is its lateness beyond the next latest rank, and how that splits between its own work and its transfers is unknown"}
	cost := map[int]int64{}
	windows := map[int]int{}
	perCallCost := map[int][]int64{} // by rank, call by call: its lateness cost there
	var spans int64
	n := 0
	lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for _, in := range inst {
		if in[1]-in[0] < 2 {
			continue
		}
		first, end := calls[in[0]].start, calls[in[0]].start
		last, next, who := int64(-1<<62), int64(-1<<62), -1
		for _, c := range calls[in[0]:in[1]] {
			first, end = min(first, c.start), max(end, c.start+c.dur)
			switch {
			case c.start > last:
				next, last, who = last, c.start, int(c.rank)
			case c.start > next:
				next = c.start
			}
		}
		n++
		spans += end - first
		lo, hi = min(lo, first), max(hi, end)
		d := max(last-next, 0)
		for _, c := range calls[in[0]:in[1]] {
			r := int(c.rank)
			if r == who {
				perCallCost[r] = append(perCallCost[r], d)
			} else {
				perCallCost[r] = append(perCallCost[r], 0)
			}
		}
		if d > 0 && who >= 0 {
			cost[who] += d
			if 100*d > end-first {
				windows[who]++
			}
		}
	}
	out.Windows = n
	if n == 0 {
		out.NoiseBoundNS = -1
		out.Replayed = false
		out.Reason = "the run has no call that several ranks recorded"
		return out
	}
	// "% of the run" is of the run's wall time, from the first call's
	// start to the last one's end, not of the time summed over calls.
	out.TotalNS = hi - lo
	out.WindowNS = float64(spans) / float64(n)
	out.WithoutNS = out.WindowNS
	var rs []int
	for r := range perCallCost {
		rs = append(rs, r)
	}
	slices.Sort(rs)
	for _, r := range rs {
		rc := RankCost{Rank: r, CostNS: cost[r], AloneNS: cost[r], ExcessNS: cost[r], Windows: windows[r], PerWindowNS: float64(cost[r]) / float64(n)}
		if out.TotalNS > 0 {
			rc.Share = float64(rc.CostNS) / float64(out.TotalNS)
		}
		out.Ranks = append(out.Ranks, rc)
	}
	slices.SortStableFunc(out.Ranks, func(a, b RankCost) int { return cmp.Compare(b.CostNS, a.CostNS) })
	if n < nameMinWindows {
		out.NoiseBoundNS = -1
		out.Undecided = fmt.Sprintf("the run has %s that several ranks made; at least %d are needed to tell a straggler from the run's own noise",
			plural(n, "call"), nameMinWindows)
		return out
	}
	// The noise: what the other ranks' lateness cost, call by call.
	top := out.Ranks[0]
	var pool []int64
	for _, r := range rs {
		if r != top.Rank {
			pool = append(pool, perCallCost[r]...)
		}
	}
	out.NoiseBoundNS = max(noiseBound(pool, n, len(rs), nameConfidence), 0)
	if top.CostNS > out.NoiseBoundNS && float64(top.CostNS) >= nameShare*float64(out.TotalNS) {
		out.Named = []int{top.Rank}
		out.WithoutNS = out.WindowNS - top.PerWindowNS
	}
	return out
}
