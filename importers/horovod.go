package importers

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/commprof/commprof/trace"
)

// The Horovod timeline (HOROVOD_TIMELINE=file, written by rank 0 only;
// horovod/common/timeline.cc) is a JSON array of Chrome trace events:
//
//   - one "process" per tensor: a process_name metadata event (pid N,
//     args.name = the tensor) before the tensor's first event; pid 0's
//     carries start_time_since_epoch_in_micros in newer versions;
//   - NEGOTIATE_<OP> begin/end spans: the coordinator waiting for every
//     rank to request the tensor; inside them, an instant "X" event named
//     after each rank as its request arrives (its readiness), written for
//     negotiations that do not go through the response cache;
//   - the operation: a top-level <OP> span (ALLREDUCE, BROADCAST, ...)
//     whose end carries args {dtype, shape}; begun for every tensor of a
//     response in one loop, so the tensors fused into one buffer have
//     consecutive starts; inside it, activity spans (QUEUE,
//     MEMCPY_IN_FUSION_BUFFER, MPI_ALLREDUCE or NCCL_ALLREDUCE,
//     MEMCPY_OUT_FUSION_BUFFER, WAIT_FOR_DATA, ...);
//   - CYCLE_START instants (HOROVOD_TIMELINE_MARK_CYCLES).
//
// Times are µs since the timeline started, on rank 0's clock. Newer
// versions close the array after every event; older ones leave it open
// ("},\n" after every event), and a killed job may leave its last event
// half written.
//
// Mapping: every collective of every tensor gets one collective event
// per rank whose readiness the file holds: start = that rank's tick, end
// = the end of the operation on rank 0 (the only completion in the file).
// A negotiation without ticks (answered from the response cache) gives
// rank 0's event alone, from the start of the operation. The tensor is the
// label; calls are numbered in the order their operations start (seq, on
// communicator "world"), so a fused response's tensors have consecutive
// numbers. Rank 0's phases become compute spans named horovod/<phase>:
// one per tensor for its negotiation, and one per response (fused
// group) for each activity, carrying the seq of the response's first
// tensor and the bytes of the whole buffer.

type hvTick struct {
	rank int
	ts   int64
}

type hvNeg struct {
	op         string
	start, end int64
	ticks      []hvTick
	dupTicks   int64
}

type hvCall struct {
	seq        int64
	op         string
	t          *hvTensor
	g          *hvGroup
	start, end int64
	neg        *hvNeg
	bytes      int64
	dtype      string
	sized      bool
	done       bool
}

type hvPhase struct {
	name       string
	start, end int64
}

// hvGroup is one response: the tensors begun together (fused).
type hvGroup struct {
	calls  []*hvCall
	open   int
	phases []hvPhase
}

func (g *hvGroup) phase(name string, start, end int64) {
	for i := range g.phases {
		if g.phases[i].name == name {
			g.phases[i].start = min(g.phases[i].start, start)
			g.phases[i].end = max(g.phases[i].end, end)
			return
		}
	}
	g.phases = append(g.phases, hvPhase{name, start, end})
}

type hvSpan struct {
	name  string
	start int64
	neg   *hvNeg
	call  *hvCall // the top-level span, or the call an activity belongs to
	top   bool
}

type hvTensor struct {
	name  string
	stack []hvSpan
	neg   *hvNeg  // a finished negotiation waiting for its operation
	call  *hvCall // the operation in progress
}

type horovod struct {
	in      *input
	s       *sink
	r       *run
	tensors map[int64]*hvTensor
	names   map[int64]string
	seq     int64
	run     *hvGroup // the response whose starts are being read
	runOp   string
	last    int64 // latest time seen, ns
	cycles  int64
	err     error
	// counts for the summary and the manifest
	calls, ticked, partial, unsized, groups, fused, maxFused int64
	byOp                                                     map[string]int64
	backends                                                 map[string]bool
	world                                                    int
	lastRanks                                                map[int]int64
}

// hvTopLevel are the response types, whose spans are the operations.
var hvTopLevel = map[string]bool{"ALLREDUCE": true, "ALLGATHER": true, "BROADCAST": true, "ALLTOALL": true,
	"REDUCESCATTER": true, "ADASUM": true, "BARRIER": true, "REDUCE": true, "JOIN": true, "ERROR": true}

func importHorovod(ctx context.Context, ins []*input, s *sink, r *run, opt *Options) error {
	if len(ins) != 1 {
		return fmt.Errorf("a Horovod timeline is one file, written by rank 0; got %d files (import each on its own)", len(ins))
	}
	in := ins[0]
	h := &horovod{in: in, s: s, r: r, tensors: map[int64]*hvTensor{}, names: map[int64]string{},
		byOp: map[string]int64{}, backends: map[string]bool{}, lastRanks: map[int]int64{}}
	c := newChromeReader(in)
	if err := c.start('[', "Horovod timeline"); err != nil {
		return err
	}
	var ev chromeEvent
	for c.next(&ev) {
		h.event(&ev)
		if h.err != nil {
			return h.err
		}
	}
	if c.events == 0 && c.end != "" && !c.unclosed {
		return notFormat(in.path, 0, c.dec.InputOffset(), "not a Horovod timeline: %s", c.end)
	}
	r.skip("events whose fields have unexpected types", c.typeErrs)
	if n, what := c.trailing(); n > 0 {
		r.skip("bytes after the end of the timeline's JSON (ignored)", n)
		r.missingf("%s: %s", in.path, what)
	}
	return h.finish(c)
}

func (h *horovod) tensor(pid int64) *hvTensor {
	t := h.tensors[pid]
	if t == nil {
		name, ok := h.names[pid]
		if !ok {
			name = "pid " + strconv.FormatInt(pid, 10)
		}
		t = &hvTensor{name: name}
		h.tensors[pid] = t
	}
	return t
}

// breakRun ends the response being read: the next operation start begins
// another.
func (h *horovod) breakRun() { h.run = nil }

func (h *horovod) event(ev *chromeEvent) {
	r := h.r
	ts, hasTs := micros(ev.Ts)
	if hasTs {
		h.last = max(h.last, ts)
	}
	pid, pidOK := idInt(ev.Pid)
	switch ev.Ph {
	case "M":
		if ev.Name != "process_name" || !pidOK {
			return
		}
		var a struct {
			Name  *string     `json:"name"`
			Start json.Number `json:"start_time_since_epoch_in_micros"`
		}
		if json.Unmarshal(ev.Args, &a) != nil {
			r.skip("metadata events with unreadable args", 1)
			return
		}
		if a.Name != nil {
			h.names[pid] = *a.Name
			if t := h.tensors[pid]; t != nil {
				t.name = *a.Name
			}
		}
		if us, ok := micros(a.Start); ok && us > 0 {
			h.r.start = time.Unix(0, us).UTC() // micros gives ns of a µs count
		}
	case "B":
		if !pidOK || !hasTs {
			r.skip("begin events without a numeric pid or ts", 1)
			return
		}
		t := h.tensor(pid)
		switch {
		case strings.HasPrefix(ev.Name, "NEGOTIATE_"):
			h.breakRun()
			t.stack = append(t.stack, hvSpan{name: ev.Name, start: ts, neg: &hvNeg{op: strings.TrimPrefix(ev.Name, "NEGOTIATE_"), start: ts}})
		case hvTopLevel[ev.Name]:
			if t.call != nil {
				r.skip("operations begun while the tensor's previous one was open", 1)
				h.breakRun()
				t.stack = append(t.stack, hvSpan{name: ev.Name, start: ts})
				return
			}
			c := &hvCall{seq: h.seq, op: ev.Name, t: t, start: ts, neg: t.neg}
			h.seq++
			t.neg = nil
			if h.run == nil || h.runOp != ev.Name {
				h.run = &hvGroup{}
				h.runOp = ev.Name
			}
			c.g = h.run
			h.run.calls = append(h.run.calls, c)
			h.run.open++
			t.call = c
			t.stack = append(t.stack, hvSpan{name: ev.Name, start: ts, call: c, top: true})
		default:
			h.breakRun()
			for _, b := range []string{"MPI", "NCCL", "GLOO", "CCL", "DDL", "ADASUM"} {
				if strings.HasPrefix(ev.Name, b+"_") {
					h.backends[b] = true
				}
			}
			t.stack = append(t.stack, hvSpan{name: ev.Name, start: ts, call: t.call})
		}
	case "E":
		h.breakRun()
		if !pidOK || !hasTs {
			r.skip("end events without a numeric pid or ts", 1)
			return
		}
		t := h.tensor(pid)
		if len(t.stack) == 0 {
			r.skip("end events without a begin", 1)
			return
		}
		sp := t.stack[len(t.stack)-1]
		t.stack = t.stack[:len(t.stack)-1]
		switch {
		case sp.neg != nil:
			sp.neg.end = ts
			h.negotiated(t, sp.neg)
		case sp.top:
			h.ended(sp.call, ts, ev.Args)
		case sp.call != nil:
			sp.call.g.phase(sp.name, sp.start, ts)
		default:
			r.skip("activities outside an operation", 1)
		}
	case "X":
		h.breakRun()
		rank, err := strconv.Atoi(ev.Name)
		if err != nil || rank < 0 || rank >= maxRanks || !pidOK || !hasTs {
			r.skip("complete (X) events that are not a rank's readiness tick", 1)
			return
		}
		t := h.tensor(pid)
		if len(t.stack) == 0 || t.stack[len(t.stack)-1].neg == nil {
			r.skip("readiness ticks outside a negotiation", 1)
			return
		}
		n := t.stack[len(t.stack)-1].neg
		for _, k := range n.ticks {
			if k.rank == rank {
				n.dupTicks++
				r.skip("repeated readiness ticks of one rank in one negotiation", 1)
				return
			}
		}
		n.ticks = append(n.ticks, hvTick{rank, ts})
		h.world = max(h.world, rank+1)
	case "i", "I":
		h.breakRun()
		if !hasTs {
			r.skip("instant events without ts", 1)
			return
		}
		name := "horovod/" + strings.ToLower(ev.Name)
		e := event(trace.KindMark, 0, name)
		e.Start = ts
		if ev.Name == "CYCLE_START" {
			h.cycles++
			e.Value = float64(h.cycles)
		}
		h.emit(0, e)
	default:
		h.breakRun()
		r.skip(fmt.Sprintf("events of phase %q", ev.Ph), 1)
	}
}

// negotiated handles a finished negotiation: it waits for the tensor's
// operation, except a barrier's, which has none.
func (h *horovod) negotiated(t *hvTensor, n *hvNeg) {
	switch n.op {
	case "JOIN":
		h.r.skip("join negotiations (not a collective)", 1)
		return
	case "BARRIER":
		// Newer Horovod does not start an operation for a barrier: the
		// negotiation is the barrier, done when the last rank arrived.
		c := &hvCall{seq: h.seq, op: "BARRIER", t: t, start: n.end, end: n.end, neg: n, done: true}
		h.seq++
		c.g = &hvGroup{calls: []*hvCall{c}}
		h.emitGroup(c.g)
		return
	}
	if t.neg != nil {
		h.r.skip("negotiations not followed by their operation", 1)
	}
	t.neg = n
}

// ended handles the end of an operation.
func (h *horovod) ended(c *hvCall, ts int64, args json.RawMessage) {
	c.end, c.done = ts, true
	c.t.call = nil
	if len(args) > 0 {
		var a struct {
			DType string `json:"dtype"`
			Shape string `json:"shape"`
		}
		if json.Unmarshal(args, &a) == nil && a.DType != "" {
			c.dtype = dtypeName(a.DType)
			if n, ok := shapeElems(a.Shape); ok && dtypeSize(c.dtype) > 0 {
				c.bytes, c.sized = mulBytes(n, dtypeSize(c.dtype)), true
			}
		}
	}
	c.g.open--
	if c.g.open == 0 {
		h.emitGroup(c.g)
	}
}

// shapeElems parses a TensorShape's DebugString ("[3, 3, 32, 64]", "[]"
// for a scalar) into its element count.
func shapeElems(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
		return 0, false
	}
	s = strings.TrimSpace(s[1 : len(s)-1])
	n := int64(1)
	if s == "" {
		return 1, true
	}
	for _, d := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(d), 10, 64)
		if err != nil || v < 0 {
			return 0, false
		}
		if v != 0 && n > (1<<62)/v {
			return 0, false
		}
		n *= v
	}
	return n, true
}

func (h *horovod) emit(rank int, e trace.Event) {
	if h.err != nil {
		return
	}
	sp, err := h.s.stream(rank, trace.RankInfo{Rank: rank})
	if err == nil {
		err = sp.add(e)
	}
	h.err = err
}

// emitGroup writes a response's events: its tensors' collectives and
// negotiations, and its phases once.
func (h *horovod) emitGroup(g *hvGroup) {
	var done []*hvCall
	for _, c := range g.calls {
		if c.done {
			done = append(done, c)
		}
	}
	if len(done) == 0 {
		return
	}
	first := done[0]
	var total int64
	sized := true
	for _, c := range done {
		total += c.bytes
		sized = sized && c.sized
		h.emitCall(c)
	}
	if !sized {
		total = 0
	}
	label := first.t.name
	if len(done) > 1 {
		label = fmt.Sprintf("%s (+%d fused)", first.t.name, len(done)-1)
		h.fused++
		h.maxFused = max(h.maxFused, int64(len(done)))
	}
	h.groups++
	sort.SliceStable(g.phases, func(i, j int) bool { return g.phases[i].start < g.phases[j].start })
	for _, p := range g.phases {
		e := event(trace.KindCompute, 0, "horovod/"+strings.ToLower(p.name))
		e.Start, e.Dur, e.Seq, e.Comm, e.Bytes, e.Label, e.DType = p.start, max(p.end-p.start, 0), first.seq, "world", total, label, first.dtype
		h.emit(0, e)
	}
}

// emitCall writes one tensor's collective: an event per rank whose
// readiness the file holds, and rank 0's negotiation span.
func (h *horovod) emitCall(c *hvCall) {
	name, algo := opName(c.op), ""
	if c.op == "ADASUM" {
		name, algo = "allreduce", "adasum"
	}
	h.calls++
	h.byOp[name]++
	if !c.sized {
		h.unsized++
	}
	base := event(trace.KindCollective, 0, name)
	base.Seq, base.Comm, base.Label, base.Bytes, base.DType, base.Algo = c.seq, "world", c.t.name, c.bytes, c.dtype, algo
	if n := c.neg; n != nil {
		neg := event(trace.KindCompute, 0, "horovod/negotiate_"+strings.ToLower(n.op))
		neg.Start, neg.Dur, neg.Seq, neg.Comm, neg.Label, neg.Bytes, neg.DType = n.start, max(n.end-n.start, 0), c.seq, "world", c.t.name, c.bytes, c.dtype
		h.emit(0, neg)
	}
	if c.neg != nil && len(c.neg.ticks) > 0 {
		h.ticked++
		has0 := false
		last := c.neg.ticks[0]
		for _, k := range c.neg.ticks {
			e := base
			e.Rank = int32(k.rank)
			e.Start, e.Dur = k.ts, max(c.end-k.ts, 0)
			has0 = has0 || k.rank == 0
			if k.ts > last.ts {
				last = k
			}
			h.emit(k.rank, e)
		}
		if len(c.neg.ticks) > 1 {
			h.lastRanks[last.rank]++
		}
		if !has0 {
			h.partial++
		}
		return
	}
	e := base
	e.Start, e.Dur = c.start, max(c.end-c.start, 0)
	h.emit(0, e)
}

func (h *horovod) finish(c *chromeReader) error {
	r := h.r
	// What was in flight when the file ends.
	var inflight, pendingNeg int64
	groups := map[*hvGroup]bool{}
	for _, t := range h.tensors {
		if t.call != nil {
			inflight++
			groups[t.call.g] = true
		}
		for _, sp := range t.stack {
			if sp.neg != nil {
				pendingNeg++
			}
		}
		if t.neg != nil {
			pendingNeg++
		}
	}
	// Responses some of whose tensors finished: those are written.
	var gs []*hvGroup
	for g := range groups {
		gs = append(gs, g)
	}
	sort.Slice(gs, func(i, j int) bool { return gs[i].calls[0].seq < gs[j].calls[0].seq })
	for _, g := range gs {
		h.emitGroup(g)
	}
	if h.err != nil {
		return h.err
	}
	r.skip("operations in flight when the timeline ends (no end event)", inflight)
	r.skip("negotiations in flight or without their operation when the timeline ends", pendingNeg)
	if c.end != "" && !c.unclosed {
		r.cut = append(r.cut, fmt.Sprintf("%s: %s", h.in.path, c.end))
		r.missingf("the rest of the timeline: %s; everything before is imported", c.end)
	}
	if h.calls == 0 {
		if c.events == 0 {
			return notFormat(h.in.path, 0, 0, "not a Horovod timeline: the JSON array holds no events")
		}
		return notFormat(h.in.path, 0, 0, "not a Horovod timeline: %d events but no collective operation (no ALLREDUCE, BROADCAST, ... spans)", c.events)
	}
	world := max(h.world, 1)
	r.world = world
	for id := range h.s.streams {
		r.ranks[id] = trace.RankInfo{Rank: id, WorldSize: world}
	}
	var backends []string
	for b := range h.backends {
		backends = append(backends, b)
	}
	sort.Strings(backends)
	r.tool = "Horovod timeline (HOROVOD_TIMELINE, written by rank 0)"
	r.phases = true
	if len(backends) > 0 {
		r.tool += " over " + strings.Join(backends, ", ")
		r.config["horovod_backend"] = strings.Join(backends, ",")
	}
	r.config["ranks"] = strconv.Itoa(world)
	r.config["tensors"] = strconv.Itoa(len(h.tensors))
	if h.cycles > 0 {
		r.metrics["horovod_cycles"] = float64(h.cycles)
	}
	ops := sortedKeys(h.byOp)
	var opl []string
	for _, o := range ops {
		opl = append(opl, fmt.Sprintf("%d %s", h.byOp[o], o))
	}
	r.summaryf("%d collectives of %d tensors (%s), %d responses of which %d fused (up to %d tensors in one buffer)",
		h.calls, len(h.tensors), strings.Join(opl, ", "), h.groups, h.fused, h.maxFused)
	r.summaryf("%d collectives carry every rank's readiness (negotiation ticks): arrival skew and the last rank are known for them", h.ticked)
	if len(h.lastRanks) > 0 {
		type rc struct {
			rank int
			n    int64
		}
		var l []rc
		for k, v := range h.lastRanks {
			l = append(l, rc{k, v})
		}
		sort.Slice(l, func(i, j int) bool { return l[i].n > l[j].n || l[i].n == l[j].n && l[i].rank < l[j].rank })
		var parts []string
		for _, x := range l[:min(len(l), 3)] {
			parts = append(parts, fmt.Sprintf("rank %d in %d", x.rank, x.n))
		}
		r.summaryf("last to become ready: %s", strings.Join(parts, ", "))
	}
	if c.unclosed {
		r.summaryf("the JSON array is not closed (older Horovod versions never close it)")
	}
	r.missingf("completion on ranks other than 0: the timeline is written by rank 0, so every rank's collective ends when rank 0's operation ends")
	if untick := h.calls - h.ticked; untick > 0 {
		r.partialRanks = true
		r.missingf("per-rank communication and waiting over the whole run: ranks other than 0 hold only the %d collectives whose negotiation names them, so per-rank figures cover those calls, and how much of the run the ranks spent communicating is unknown", h.ticked)
		r.missingf("per-rank readiness for %d of %d collectives: Horovod writes ticks only for negotiations not answered from its response cache; those collectives have rank 0's event alone, from the start of its operation, and their negotiation span (horovod/negotiate_*) bounds the arrival skew without naming the last rank", untick, h.calls)
	}
	if h.partial > 0 {
		r.missingf("rank 0's readiness in %d negotiations whose ticks name other ranks only: rank 0 has no event for those collectives", h.partial)
	}
	if h.unsized > 0 {
		r.missingf("message size and dtype of %d collectives: the timeline gives no dtype and shape at their end", h.unsized)
	}
	r.missingf("training compute: the timeline holds none; the compute spans named horovod/* are Horovod's own phases on rank 0 (negotiation, fusion-buffer copies, the MPI or NCCL call), so compute, overlap and exposed communication are unknown")
	r.missingf("steps, hosts and process ids: not in the timeline")
	r.missingf("the messages of the MPI or NCCL library inside each collective: not in the timeline")
	return nil
}
