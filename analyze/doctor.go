package analyze

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/trace"
)

// The doctor: which rank holds a job up, and where ranks called different
// things. docs/doctor.md says what it detects and what it cannot.

// DoctorCall is one collective call a rank made, as its trace recorded it
// (a completed call) or its in-flight file shows it (a call under way).
type DoctorCall struct {
	Comm  string `json:"comm"`
	Seq   int64  `json:"seq"` // its sequence number on Comm
	Op    string `json:"op"`
	Bytes int64  `json:"bytes"`
	DType string `json:"dtype,omitempty"`
	Root  int    `json:"root"`            // world rank; -1 none
	RedOp string `json:"redop,omitempty"` // "" where not known (traces do not hold it)
}

// DoctorInput is what the doctor reads of a run: its manifest's word, the
// ranks' in-flight files and the collectives their traces hold.
type DoctorInput struct {
	World  int
	Status string // run.json's status ("" when there is none)
	Error  string // run.json's error
	// Live: the job is still running (record watches it); Ended: its
	// launcher has exited, so no rank is alive.
	Live, Ended bool
	Now         time.Time
	// InFlight holds the ranks' in-flight files, any order; ranks
	// without one are absent.
	InFlight []*trace.InFlight
	// Gone: ranks whose process is known to have ended.
	Gone map[int]bool
	// ExitStatus: each rank's exit status, where the launcher knew it.
	ExitStatus map[int]int
	// Calls: by rank, the collectives its trace holds, in its order.
	// Streams: ranks that wrote a stream.
	Calls   map[int][]DoctorCall
	Streams map[int]bool
	// Imported: the run was imported from another tool's files, which
	// say nothing of how each rank ended.
	Imported bool
}

// Doctor rank states.
const (
	StateBlocked      = "blocked"       // inside a call
	StateComputing    = "computing"     // between calls (a hang inside compute looks like this)
	StateFinalizing   = "finalizing"    // in MPI_Finalize
	StateFinished     = "finished"      // ended its recording normally
	StateAborted      = "aborted"       // called MPI_Abort
	StateExited       = "exited"        // its process ended while the others' went on
	StateNeverArrived = "never_arrived" // never joined the recording
	StateUnknown      = "unknown"       // a stream but no in-flight file, and the job may still run
)

// DoctorRank is one rank's diagnosis.
type DoctorRank struct {
	Rank  int    `json:"rank"`
	State string `json:"state"`
	// Alive: its process was running when the diagnosis was made. Once
	// the whole job has ended, State is what each rank was doing when it
	// ended; a rank whose process ended while the others' ran is exited.
	Alive bool `json:"alive"`
	// The call it is blocked in (or died in: InCall), or, computing, the
	// last one it returned from.
	InCall bool   `json:"in_call"`
	Kind   string `json:"kind,omitempty"`
	Op     string `json:"op,omitempty"`
	Comm   string `json:"comm,omitempty"`
	Seq    int64  `json:"seq"`  // on Comm, 0-based as in the trace; -1 none
	Call   int64  `json:"call"` // Seq+1: "allreduce #6" is the 6th call on Comm; 0 none
	Bytes  int64  `json:"bytes"`
	DType  string `json:"dtype,omitempty"`
	RedOp  string `json:"redop,omitempty"`
	Root   int    `json:"root"`
	Peer   int    `json:"peer"` // -2: any source
	// SinceNS: when it entered the call (or left the last one, computing),
	// ns since the run's start; ForNS: how long ago, when the job is live.
	SinceNS   int64 `json:"since_ns"`
	ForNS     int64 `json:"for_ns,omitempty"`
	Completed int64 `json:"completed_calls"`
	// Error: the error code the last call returned (0: it succeeded).
	Error int `json:"error,omitempty"`
	// LastCompleted is the last collective its trace holds.
	LastCompleted *DoctorCall `json:"last_completed,omitempty"`
	ExitStatus    *int        `json:"exit_status,omitempty"`
	Host          string      `json:"host,omitempty"`
	PID           int         `json:"pid,omitempty"`
	WaitsFor      []int       `json:"waits_for,omitempty"`
	Culprit       bool        `json:"culprit"`
	// HoldsUp is, for a culprit, the call others wait for it in.
	HoldsUp *DoctorCall `json:"holds_up,omitempty"`
}

// MismatchSide is what a group of ranks called at one call of a
// communicator; Missing: they did not call it at all.
type MismatchSide struct {
	Ranks   []int  `json:"ranks"`
	Missing bool   `json:"missing,omitempty"`
	Op      string `json:"op,omitempty"`
	Bytes   int64  `json:"bytes"`
	DType   string `json:"dtype,omitempty"`
	Root    int    `json:"root"`
	RedOp   string `json:"redop,omitempty"`
}

// Mismatch is a call of a communicator at which ranks disagree.
type Mismatch struct {
	Comm string `json:"comm"`
	Seq  int64  `json:"seq"`
	Call int64  `json:"call"`
	// Ranks are the odd ones: all but the largest side's.
	Ranks []int `json:"ranks"`
	// Fields: what differs (op, bytes, dtype, root, redop, missing).
	Fields []string       `json:"fields"`
	Sides  []MismatchSide `json:"sides"`
	Text   string         `json:"text"`
}

// Diagnosis is the doctor's verdict on a run.
type Diagnosis struct {
	Status string `json:"status"`
	// Verdict: "hang" (ranks blocked, some waiting on others), "mismatch"
	// (ranks called different things), "died" (a rank ended before the
	// others), "ok", or "unknown".
	Verdict    string       `json:"verdict"`
	Culprits   []int        `json:"culprits"`
	Summary    []string     `json:"summary"`
	Ranks      []DoctorRank `json:"ranks"`
	Mismatches []Mismatch   `json:"mismatches"`
}

// Headline is the diagnosis's first sentence, or "".
func (d *Diagnosis) Headline() string {
	if d == nil || len(d.Summary) == 0 {
		return ""
	}
	return d.Summary[0]
}

// Healthy reports whether the diagnosis found nothing wrong.
func (d *Diagnosis) Healthy() bool { return d == nil || d.Verdict == "ok" }

// maxDoctorRanks bounds the ranks a diagnosis holds (a few hundred bytes
// each): ranks past it are left out.
const maxDoctorRanks = 1 << 16

type commSeq struct {
	comm string
	seq  int64
}

// Diagnose explains a run: which call each rank is in or last made,
// which ranks hold the others up, and where ranks called different
// things at the same call of a communicator.
func Diagnose(in DoctorInput) Diagnosis {
	// The world: the ranks seen, and as many more as the manifest or an
	// in-flight file says, within reason (a damaged file may claim any
	// number).
	seenRanks := 0
	fl := map[int]*trace.InFlight{}
	for _, f := range in.InFlight {
		if f != nil && f.Rank >= 0 && f.Rank < maxDoctorRanks {
			fl[f.Rank] = f
			seenRanks = max(seenRanks, f.Rank+1)
		}
	}
	for r := range in.Streams {
		if r >= 0 && r < maxDoctorRanks {
			seenRanks = max(seenRanks, r+1)
		}
	}
	for r := range in.Calls {
		if r >= 0 && r < maxDoctorRanks {
			seenRanks = max(seenRanks, r+1)
		}
	}
	claimed := in.World
	for _, f := range fl {
		claimed = max(claimed, f.World)
	}
	world := seenRanks
	if claimed > seenRanks && claimed <= 4*seenRanks+1024 {
		world = claimed
	}
	d := Diagnosis{Status: in.Status, Culprits: []int{}, Mismatches: []Mismatch{}, Summary: []string{}}
	if in.Live {
		d.Status = "running"
	}
	anyArrived := len(fl) > 0 || len(in.Streams) > 0

	// Each rank's state and position.
	for r := 0; r < world; r++ {
		dr := DoctorRank{Rank: r, Seq: -1, Root: -1, Peer: -1}
		if st, ok := in.ExitStatus[r]; ok {
			dr.ExitStatus = &st
		}
		calls := in.Calls[r]
		if n := len(calls); n > 0 {
			c := calls[n-1]
			dr.LastCompleted = &c
		}
		gone := in.Ended || in.Gone[r]
		dr.Alive = !gone
		f := fl[r]
		switch {
		case f == nil && !in.Streams[r] && len(calls) == 0:
			dr.State = StateNeverArrived
			if !anyArrived {
				dr.State = StateUnknown
			}
		case f == nil:
			dr.State = StateUnknown
			if !in.Imported && (gone || in.Status == trace.StatusComplete) {
				dr.State = StateExited
				if in.Status == trace.StatusComplete {
					dr.State = StateFinished
				}
			}
			if dr.LastCompleted != nil {
				c := dr.LastCompleted
				dr.Kind, dr.Op, dr.Comm, dr.Seq, dr.Bytes, dr.DType, dr.Root = "collective", c.Op, c.Comm, c.Seq, c.Bytes, c.DType, c.Root
			}
		default:
			dr.Host, dr.PID, dr.Completed, dr.Error = f.Host, f.PID, f.Completed, f.Error
			dr.Kind, dr.Op, dr.Comm, dr.Seq, dr.Bytes, dr.DType, dr.RedOp, dr.Root, dr.Peer =
				f.Kind.String(), f.Op, f.Comm, f.Seq, f.Bytes, f.DType, f.RedOp, f.Root, f.Peer
			since, at := f.ExitNS, f.Exit
			switch f.State {
			case trace.InFlightBlocked:
				dr.State, dr.InCall = StateBlocked, true
				since, at = f.EntryNS, f.Entry
			case trace.InFlightFinalizing:
				dr.State = StateFinalizing
				since, at = f.EntryNS, f.Entry
			case trace.InFlightFinished:
				dr.State = StateFinished
			case trace.InFlightAborted:
				dr.State = StateAborted
			default:
				dr.State = StateComputing
			}
			if in.Gone[r] && !in.Ended && (dr.State == StateBlocked || dr.State == StateComputing || dr.State == StateFinalizing) {
				dr.State = StateExited
			}
			dr.SinceNS = since
			if in.Live && !at.IsZero() && !in.Now.IsZero() {
				dr.ForNS = in.Now.Sub(at).Nanoseconds()
			}
		}
		if dr.Seq >= 0 && dr.Kind == "collective" {
			dr.Call = dr.Seq + 1
		}
		d.Ranks = append(d.Ranks, dr)
	}

	// Who calls what at each call of each communicator: the traces'
	// completed calls and the calls under way.
	at := map[commSeq]map[int]DoctorCall{}
	next := map[string]map[int]int64{} // comm -> rank -> calls on it made or under way
	members := map[string]map[int]bool{}
	add := func(r int, c DoctorCall) {
		if r < 0 || r >= world {
			return
		}
		k := commSeq{c.Comm, c.Seq}
		if at[k] == nil {
			at[k] = map[int]DoctorCall{}
		}
		at[k][r] = c
		if next[c.Comm] == nil {
			next[c.Comm] = map[int]int64{}
			members[c.Comm] = map[int]bool{}
		}
		next[c.Comm][r] = max(next[c.Comm][r], c.Seq+1)
		members[c.Comm][r] = true
	}
	for r, calls := range in.Calls {
		for _, c := range calls {
			add(r, c)
		}
	}
	for i := range d.Ranks {
		dr := &d.Ranks[i]
		// The calls a rank made last (which its trace may not hold yet,
		// or at all when they failed), and the one it is in.
		if f := fl[dr.Rank]; f != nil {
			for _, c := range f.Recent {
				if c.Seq >= 0 && len(c.Comm) < 31 {
					add(dr.Rank, DoctorCall{Comm: c.Comm, Seq: c.Seq, Op: c.Op, Bytes: c.Bytes, DType: c.DType, Root: c.Root, RedOp: c.RedOp})
				}
			}
		}
		if fl[dr.Rank] != nil && dr.Kind == "collective" && dr.Seq >= 0 {
			add(dr.Rank, DoctorCall{Comm: dr.Comm, Seq: dr.Seq, Op: dr.Op, Bytes: dr.Bytes, DType: dr.DType, Root: dr.Root, RedOp: dr.RedOp})
		}
		if f := fl[dr.Rank]; f != nil && f.Comm != "" && f.Members != nil {
			if members[f.Comm] == nil {
				members[f.Comm] = map[int]bool{}
				next[f.Comm] = map[int]int64{}
			}
			for _, m := range f.Members {
				if m < world {
					members[f.Comm][m] = true
				}
			}
		}
	}
	if members["world"] != nil || world > 0 {
		if members["world"] == nil {
			members["world"] = map[int]bool{}
			next["world"] = map[int]int64{}
		}
		for r := 0; r < world; r++ {
			members["world"][r] = true
		}
	}

	// Mismatches: at each call, sides by what they called; a member that
	// is not there and is not going to be (it stopped before it) is a
	// missing side, but only at its communicator's first such call.
	byRank := func(r int) *DoctorRank { return &d.Ranks[r] }
	keys := make([]commSeq, 0, len(at))
	for k := range at {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].comm != keys[j].comm {
			return keys[i].comm < keys[j].comm
		}
		return keys[i].seq < keys[j].seq
	})
	missingReported := map[string]bool{}
	for _, k := range keys {
		calls := at[k]
		var sides []MismatchSide
		var fields []string
		ranks := make([]int, 0, len(calls))
		for r := range calls {
			ranks = append(ranks, r)
		}
		sort.Ints(ranks)
		for _, r := range ranks {
			c := calls[r]
			placed := false
			for i := range sides {
				if f := differs(sides[i], c); len(f) == 0 {
					sides[i].Ranks = append(sides[i].Ranks, r)
					if sides[i].RedOp == "" {
						sides[i].RedOp = c.RedOp
					}
					placed = true
					break
				}
			}
			if !placed {
				for i := range sides {
					fields = addFields(fields, differs(sides[i], c))
				}
				sides = append(sides, MismatchSide{Ranks: []int{r}, Op: c.Op, Bytes: c.Bytes, DType: c.DType, Root: c.Root, RedOp: c.RedOp})
			}
		}
		if !missingReported[k.comm] {
			var missing []int
			for m := range members[k.comm] {
				if _, ok := calls[m]; ok || m >= world {
					continue
				}
				// m has not made this call: it stopped before it when
				// it made no later call on the communicator. A rank whose
				// last call failed was stopped by the job's failure (a
				// peer's error reached it on its way), not missing by its
				// own doing.
				if f := fl[m]; f != nil && f.Error != 0 && f.State != trace.InFlightBlocked {
					continue
				}
				if next[k.comm][m] <= k.seq {
					missing = append(missing, m)
				}
			}
			if len(missing) > 0 {
				sort.Ints(missing)
				sides = append(sides, MismatchSide{Ranks: missing, Missing: true, Root: -1})
				fields = addFields(fields, []string{"missing"})
				missingReported[k.comm] = true
			}
		}
		if len(sides) < 2 {
			continue
		}
		m := Mismatch{Comm: k.comm, Seq: k.seq, Call: k.seq + 1, Fields: fields}
		// The largest side is the expected one (ties: a side that made
		// the call, then the one with the lowest rank); the others are
		// odd. Ranks that did not make a call the fewer others made are
		// the expected side: the fewer called something out of turn.
		sort.SliceStable(sides, func(i, j int) bool {
			if len(sides[i].Ranks) != len(sides[j].Ranks) {
				return len(sides[i].Ranks) > len(sides[j].Ranks)
			}
			if sides[i].Missing != sides[j].Missing {
				return !sides[i].Missing
			}
			return sides[i].Ranks[0] < sides[j].Ranks[0]
		})
		m.Sides = sides
		for _, s := range sides[1:] {
			m.Ranks = append(m.Ranks, s.Ranks...)
		}
		sort.Ints(m.Ranks)
		m.Text = mismatchText(m)
		d.Mismatches = append(d.Mismatches, m)
	}
	sort.SliceStable(d.Mismatches, func(i, j int) bool {
		a, b := d.Mismatches[i], d.Mismatches[j]
		am, bm := slicesContains(a.Fields, "missing") && len(a.Fields) == 1, slicesContains(b.Fields, "missing") && len(b.Fields) == 1
		if am != bm {
			return !am // a disagreement on what was called first, then missing ranks
		}
		return false
	})

	// Who waits for whom: a rank blocked in a call, or that ended inside
	// one (the launcher killed it there), waits for the ranks the call
	// needs that are not in it.
	// A rank whose last call failed (a peer died under it) was in it as
	// well.
	waiting := func(dr *DoctorRank) bool {
		in := dr.InCall && (dr.State == StateBlocked || dr.State == StateExited) ||
			!dr.InCall && dr.Error != 0 && (dr.State == StateComputing || dr.State == StateExited)
		return in && (dr.Kind == "collective" || dr.Kind == "send" || dr.Kind == "recv")
	}
	// A rank whose last call failed took part in it: the call ended
	// under it (a peer died), it does not hold it up.
	blockedAt := map[commSeq]map[int]bool{}
	for i := range d.Ranks {
		dr := &d.Ranks[i]
		if (waiting(dr) || !dr.InCall && dr.Error != 0) && dr.Kind == "collective" {
			k := commSeq{dr.Comm, dr.Seq}
			if blockedAt[k] == nil {
				blockedAt[k] = map[int]bool{}
			}
			blockedAt[k][dr.Rank] = true
		}
	}
	for i := range d.Ranks {
		dr := &d.Ranks[i]
		if !waiting(dr) {
			continue
		}
		var w []int
		switch dr.Kind {
		case "collective":
			k := commSeq{dr.Comm, dr.Seq}
			for m := range members[dr.Comm] {
				if m != dr.Rank && m < world && !blockedAt[k][m] {
					w = append(w, m)
				}
			}
		case "send", "recv":
			if dr.Peer >= 0 && dr.Peer < world {
				w = []int{dr.Peer}
			} else if dr.Peer == trace.AnySource {
				for m := range members[dr.Comm] {
					if m != dr.Rank && m < world && !waiting(&d.Ranks[m]) {
						w = append(w, m)
					}
				}
			}
		}
		sort.Ints(w)
		dr.WaitsFor = w
	}
	blocked := 0
	for _, dr := range d.Ranks {
		if dr.State == StateBlocked {
			blocked++
		}
	}
	culprit := map[int]bool{}
	seen := map[int]bool{}
	var queue []int
	for i := range d.Ranks {
		if waiting(&d.Ranks[i]) {
			queue = append(queue, i)
			seen[i] = true
		}
	}
	for len(queue) > 0 {
		r := queue[0]
		queue = queue[1:]
		for _, w := range byRank(r).WaitsFor {
			if seen[w] {
				continue
			}
			seen[w] = true
			if waiting(byRank(w)) {
				queue = append(queue, w)
			} else {
				culprit[w] = true
			}
		}
	}
	// After a disagreement on a communicator, ranks missing from its
	// later calls follow from it: they are not told apart.
	var disagree []Mismatch
	first := map[string]int64{}
	for _, m := range d.Mismatches {
		if !(len(m.Fields) == 1 && m.Fields[0] == "missing") {
			disagree = append(disagree, m)
			if s, ok := first[m.Comm]; !ok || m.Seq < s {
				first[m.Comm] = m.Seq
			}
		}
	}
	kept := d.Mismatches[:0]
	for _, m := range d.Mismatches {
		if s, ok := first[m.Comm]; ok && len(m.Fields) == 1 && m.Fields[0] == "missing" && m.Seq > s {
			continue
		}
		kept = append(kept, m)
	}
	d.Mismatches = kept
	if len(disagree) > 0 {
		// A disagreement is the cause (what waits or fails after it
		// follows from it): the odd ranks of the first one on each
		// communicator.
		culprit = map[int]bool{}
		done := map[string]bool{}
		for _, m := range disagree {
			if done[m.Comm] {
				continue
			}
			done[m.Comm] = true
			for _, r := range m.Ranks {
				culprit[r] = true
			}
		}
	}
	// Ranks that died: a non-zero exit status, MPI_Abort, or a process
	// that ended while the others' ran.
	var died []int
	for _, dr := range d.Ranks {
		if dr.State == StateAborted || dr.State == StateExited || dr.ExitStatus != nil && *dr.ExitStatus != 0 {
			died = append(died, dr.Rank)
		}
	}
	if len(culprit) == 0 && len(died) > 0 && len(died) < world {
		for _, r := range died {
			culprit[r] = true
		}
	}
	if len(culprit) == 0 && len(d.Mismatches) > 0 {
		// The first mismatch's ranks.
		for _, r := range d.Mismatches[0].Ranks {
			culprit[r] = true
		}
	}
	// Ranks that wait only for each other (a deadlock, such as two ranks
	// each receiving from the other first): the ranks waited for are the
	// culprits together.
	deadlock := false
	if len(culprit) == 0 {
		for i := range d.Ranks {
			if !waiting(&d.Ranks[i]) {
				continue
			}
			for _, w := range d.Ranks[i].WaitsFor {
				if waiting(&d.Ranks[w]) {
					culprit[w] = true
					deadlock = true
				}
			}
		}
	}
	for r := range culprit {
		d.Culprits = append(d.Culprits, r)
		d.Ranks[r].Culprit = true
		for i := range d.Ranks {
			w := &d.Ranks[i]
			if w.Kind == "collective" && slicesContainsInt(w.WaitsFor, r) {
				d.Ranks[r].HoldsUp = &DoctorCall{Comm: w.Comm, Seq: w.Seq, Op: w.Op, Bytes: w.Bytes, DType: w.DType, Root: w.Root, RedOp: w.RedOp}
				break
			}
		}
	}
	sort.Ints(d.Culprits)

	// The verdict and its sentences, the culprits' first.
	culpritsDied := len(culprit) > 0
	for r := range culprit {
		culpritsDied = culpritsDied && slicesContainsInt(died, r)
	}
	switch {
	case len(disagree) > 0:
		d.Verdict = "mismatch"
	case culpritsDied:
		d.Verdict = "died"
	case len(seen) > 0 && (len(culprit) > 0 || blocked > 0):
		// Ranks wait (or were killed waiting) in calls.
		d.Verdict = "hang"
	case len(died) > 0:
		d.Verdict = "died"
	case len(d.Mismatches) > 0:
		d.Verdict = "hang"
	case in.Status == trace.StatusComplete || allFinished(d.Ranks):
		d.Verdict = "ok"
	default:
		d.Verdict = "unknown"
	}
	d.Summary = summaryLines(&d, in)
	if deadlock {
		var parts []string
		for _, r := range d.Culprits {
			parts = append(parts, fmt.Sprintf("rank %d in %s waits for %s", r, d.Ranks[r].callText(), RankList(d.Ranks[r].WaitsFor)))
		}
		d.Summary = append([]string{"ranks wait for each other (a deadlock): " + strings.Join(parts, "; ")}, d.Summary...)
	}
	return d
}

func allFinished(rs []DoctorRank) bool {
	for _, r := range rs {
		if r.State != StateFinished {
			return false
		}
	}
	return len(rs) > 0
}

func slicesContainsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// reductions are the collectives whose datatype must match on every rank.
var reductions = map[string]bool{"allreduce": true, "reduce": true, "scan": true, "exscan": true, "reducescatter": true, "reducescatterv": true}

// sameBytes are the collectives whose bytes are the same on every rank of
// a correct program (the v forms' differ by design).
var sameBytes = map[string]bool{"allreduce": true, "broadcast": true, "reduce": true, "allgather": true, "reducescatter": true,
	"scan": true, "exscan": true, "alltoall": true, "barrier": true}

var rooted = map[string]bool{"broadcast": true, "reduce": true, "gather": true, "gatherv": true, "scatter": true, "scatterv": true}

// differs lists what c's call differs from side s's in.
func differs(s MismatchSide, c DoctorCall) []string {
	if s.Op != c.Op {
		return []string{"op"}
	}
	var f []string
	if sameBytes[c.Op] && s.Bytes != c.Bytes {
		f = append(f, "bytes")
	}
	if reductions[c.Op] && s.DType != "" && c.DType != "" && s.DType != c.DType {
		f = append(f, "dtype")
	}
	if rooted[c.Op] && s.Root != c.Root {
		f = append(f, "root")
	}
	if s.RedOp != "" && c.RedOp != "" && s.RedOp != c.RedOp {
		f = append(f, "redop")
	}
	return f
}

func addFields(a, b []string) []string {
	for _, x := range b {
		if !slicesContains(a, x) {
			a = append(a, x)
		}
	}
	return a
}

// RankList writes ranks as "rank 3" or "ranks 0-2, 5".
func RankList(rs []int) string {
	if len(rs) == 1 {
		return fmt.Sprintf("rank %d", rs[0])
	}
	s := append([]int(nil), rs...)
	sort.Ints(s)
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, fmt.Sprint(s[i]))
		case j == i+1:
			parts = append(parts, fmt.Sprint(s[i]), fmt.Sprint(s[j]))
		default:
			parts = append(parts, fmt.Sprintf("%d-%d", s[i], s[j]))
		}
		i = j + 1
	}
	return "ranks " + strings.Join(parts, ", ")
}

func sideText(s MismatchSide, fields []string) string {
	if s.Missing {
		return "did not call it"
	}
	t := s.Op
	var det []string
	for _, f := range fields {
		switch f {
		case "bytes":
			det = append(det, units.Bytes(s.Bytes))
		case "dtype":
			det = append(det, s.DType)
		case "root":
			det = append(det, fmt.Sprintf("root %d", s.Root))
		case "redop":
			det = append(det, s.RedOp)
		}
	}
	if len(det) > 0 {
		t += " (" + strings.Join(det, ", ") + ")"
	}
	return t
}

func mismatchText(m Mismatch) string {
	var odd []string
	for _, s := range m.Sides[1:] {
		if s.Missing {
			odd = append(odd, RankList(s.Ranks)+" did not call it")
		} else {
			odd = append(odd, RankList(s.Ranks)+" called "+sideText(s, m.Fields))
		}
	}
	if m.Sides[0].Missing {
		return fmt.Sprintf("at call #%d on %s %s, %s did not call it", m.Call, m.Comm, strings.Join(odd, "; "), RankList(m.Sides[0].Ranks))
	}
	return fmt.Sprintf("at call #%d on %s %s, %s %s", m.Call, m.Comm, strings.Join(odd, "; "),
		RankList(m.Sides[0].Ranks), sideText(m.Sides[0], m.Fields))
}

// Where says what a rank is doing, for people: "blocked in allreduce #6
// on world since 12.3 s (for 7.0 s)".
func (r DoctorRank) Where() string {
	call := r.callText()
	since := fmt.Sprintf("since %.1f s", float64(r.SinceNS)/1e9)
	if r.ForNS > 0 {
		since += fmt.Sprintf(" (for %s)", units.Duration(float64(r.ForNS)))
	}
	switch r.State {
	case StateBlocked:
		if !r.Alive {
			return "was blocked in " + call + " " + since + " when the job ended"
		}
		return "blocked in " + call + " " + since
	case StateComputing:
		s := "computing " + since
		if !r.Alive {
			s = "was computing " + since + " when the job ended"
		}
		if r.Op == "" {
			return s + ", no call yet"
		}
		return s + "; last call " + call
	case StateFinalizing:
		if r.Op != "" {
			return "in MPI_Finalize " + since + "; last call " + call
		}
		return "in MPI_Finalize " + since
	case StateExited:
		s := "exited"
		if r.ExitStatus != nil {
			s += fmt.Sprintf(" (status %d)", *r.ExitStatus)
		}
		if r.InCall && r.Op != "" {
			return s + " inside " + call
		}
		if r.Op != "" {
			return s + "; last call " + call
		}
		return s
	case StateAborted:
		return "called MPI_Abort; last call " + call
	case StateFinished:
		return "finished"
	case StateNeverArrived:
		return "never arrived (no stream, no in-flight state)"
	}
	if r.Op != "" {
		return "unknown; last completed call " + call
	}
	return "unknown"
}

func (r DoctorRank) callText() string {
	if e := r.Error; e != 0 && !r.InCall {
		r.Error = 0
		return r.callText() + fmt.Sprintf(" (it failed: error %d)", e)
	}
	switch {
	case r.Kind == "collective" && r.Seq >= 0:
		return fmt.Sprintf("%s #%d on %s", r.Op, r.Seq+1, r.Comm)
	case r.Kind == "send" || r.Kind == "recv":
		peer := fmt.Sprintf("rank %d", r.Peer)
		if r.Peer == trace.AnySource {
			peer = "any rank"
		}
		dir := "from"
		if r.Kind == "send" {
			dir = "to"
		}
		return fmt.Sprintf("%s %s %s on %s (tag %d)", r.Op, dir, peer, r.Comm, r.Seq)
	case r.Op != "":
		return r.Op
	}
	return "no call"
}

func summaryLines(d *Diagnosis, in DoctorInput) []string {
	var out []string
	// Culprits first, each with what the others wait for; when ranks
	// called different things, that disagreement is the cause.
	for _, c := range d.Culprits {
		if d.Verdict == "mismatch" {
			break
		}
		cr := d.Ranks[c]
		// The call the others wait for it in: a collective if any, and
		// the ranks waiting in that same call.
		var waitedIn *DoctorRank
		for i := range d.Ranks {
			w := &d.Ranks[i]
			if w.InCall && slicesContainsInt(w.WaitsFor, c) && (waitedIn == nil || waitedIn.Kind != "collective" && w.Kind == "collective") {
				waitedIn = w
			}
		}
		var waiters []int
		for i := range d.Ranks {
			w := &d.Ranks[i]
			if waitedIn != nil && w.InCall && slicesContainsInt(w.WaitsFor, c) && w.callText() == waitedIn.callText() {
				waiters = append(waiters, w.Rank)
			}
		}
		switch {
		case waitedIn != nil && waitedIn.Kind == "collective":
			verb := "wait"
			if !waitedIn.Alive {
				verb = "waited"
			}
			s := fmt.Sprintf("rank %d has not entered %s; %s %s in it %s", c, waitedIn.callText(), RankList(waiters), verb, sinceText(*waitedIn))
			out = append(out, s+"; rank "+fmt.Sprint(c)+": "+cr.Where())
		case waitedIn != nil:
			out = append(out, fmt.Sprintf("%s wait for rank %d in %s; rank %d: %s", RankList(waiters), c, waitedIn.callText(), c, cr.Where()))
		case cr.State == StateAborted || cr.State == StateExited || cr.ExitStatus != nil && *cr.ExitStatus != 0:
			// said below, with the ranks that died
		default:
			if m := missingAt(d.Mismatches, c); m != nil {
				out = append(out, fmt.Sprintf("rank %d has no call #%d on %s, which %s made (%s); rank %d: %s", c, m.Call, m.Comm,
					RankList(m.Sides[0].Ranks), m.Sides[0].Op, c, cr.Where()))
				break
			}
			out = append(out, fmt.Sprintf("rank %d is the odd one: %s", c, cr.Where()))
		}
	}
	for _, m := range d.Mismatches {
		if len(out) > 12 {
			out = append(out, fmt.Sprintf("... %d mismatches in all", len(d.Mismatches)))
			break
		}
		out = append(out, m.Text)
	}
	var deaths []string
	for _, r := range d.Ranks {
		if r.State == StateAborted || r.State == StateExited || r.ExitStatus != nil && *r.ExitStatus != 0 {
			s := fmt.Sprintf("rank %d died", r.Rank)
			if r.ExitStatus != nil {
				s += fmt.Sprintf(" (exit status %d)", *r.ExitStatus)
			}
			if r.InCall && r.Op != "" {
				s += " inside " + r.callText()
			} else if r.Op != "" {
				s += "; its last call " + r.callText()
			}
			deaths = append(deaths, s)
		}
	}
	if d.Verdict == "died" {
		out = append(deaths, out...)
	} else {
		out = append(out, deaths...)
	}
	if len(out) == 0 {
		switch d.Verdict {
		case "ok":
			out = append(out, "no hang and no mismatch: every rank made the same calls")
		default:
			out = append(out, "no rank waits on another and no call disagrees")
		}
	}
	if in.Error != "" && d.Verdict != "ok" && len(d.Culprits) == 0 {
		out = append(out, "run.json: "+in.Error)
	}
	return out
}

// missingAt is the first mismatch at which rank r is missing.
func missingAt(ms []Mismatch, r int) *Mismatch {
	for i := range ms {
		for _, s := range ms[i].Sides {
			if s.Missing && slicesContainsInt(s.Ranks, r) {
				return &ms[i]
			}
		}
	}
	return nil
}

func sinceText(r DoctorRank) string {
	s := fmt.Sprintf("since %.1f s", float64(r.SinceNS)/1e9)
	if r.ForNS > 0 {
		s += fmt.Sprintf(" (for %s)", units.Duration(float64(r.ForNS)))
	}
	return s
}
