package importers

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/trace"
)

// PyTorch profiler traces (torch.profiler with tensorboard_trace_handler
// or export_chrome_trace; written by Kineto) are JSON objects: traceEvents
// (Chrome trace events), distributedInfo {rank, world_size, backend,
// pg_config, nccl_version}, deviceProperties, baseTimeNanoseconds (the
// origin of ts in newer versions), ... One file per rank (worker).
//
// Communication appears as:
//   - newer PyTorch (2.1+): record_param_comms CPU ops and NCCL kernels
//     whose args carry "Collective name", "In msg nelems", "Out msg
//     nelems", "dtype", "Group size", "Process Group Name/Description/
//     Ranks" and sometimes "Seq"; the kernel's "External id" is the CPU
//     op's;
//   - older PyTorch: nccl:<op> user annotations around the c10d call, with
//     "Input Dims" and "Input type", and ncclKernel_<Op>_<ALGO>_<PROTO>_...
//     kernels, linked to the annotation through the cudaLaunchKernel call
//     that has the kernel's correlation id.
//
// Mapping: one collective event per NCCL kernel (start and end on the GPU,
// where a rank that arrives early waits inside the kernel), or per CPU
// call when the collective ran without one (gloo). Bytes are the larger of
// the input and output buffers (the whole buffer, as nccl-tests counts),
// the communicator is "world" for the default process group and
// pg/<name> for others, the process group is the label, and calls are
// numbered per group in call order (or by the trace's own Seq). GPU
// kernels, copies and memsets are the rank's compute spans; a trace
// without GPU activity has its CPU operators as compute instead.
// ProfilerStep#N annotations are steps.

// kArgs are the args of Kineto events the importer reads.
type kArgs struct {
	ExternalID  json.RawMessage `json:"External id"`
	Correlation json.RawMessage `json:"correlation"`
	CollName    string          `json:"Collective name"`
	InNelems    json.RawMessage `json:"In msg nelems"`
	OutNelems   json.RawMessage `json:"Out msg nelems"`
	DType       string          `json:"dtype"`
	GroupSize   json.RawMessage `json:"Group size"`
	PGName      json.RawMessage `json:"Process Group Name"`
	PGDesc      string          `json:"Process Group Description"`
	PGRanks     json.RawMessage `json:"Process Group Ranks"`
	Seq         json.RawMessage `json:"Seq"`
	InputDims   json.RawMessage `json:"Input Dims"`
	InputType   json.RawMessage `json:"Input type"`
}

// num reads a JSON number or numeric string.
func num(raw json.RawMessage) (int64, bool) {
	s := strings.Trim(string(bytes.TrimSpace(raw)), `"`)
	if s == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != float64(int64(f)) {
			return 0, false
		}
		n = int64(f)
	}
	return n, true
}

// kComm is one communication record of a rank: a kernel, a CPU op or an
// annotation.
type kComm struct {
	start, end  int64 // ns on the file's clock
	cpuStart    int64 // the call on the CPU, -1 if unknown
	op          string
	bytes       int64
	dtype       string
	algo        string
	pg, pgDesc  string
	pgSize      int64
	pgRanks     string
	seq         int64 // the trace's own, -1 if none
	extID       int64
	corr        int64
	tid         string
	gpu         bool
	named       bool // op from the trace's "Collective name"
	linked      bool // a CPU record or annotation joined to a kernel
	annotations string
	// parent is the CPU call an annotation or c10d op was joined to: the
	// record that stands for the call.
	parent *kComm
	// kernelName is a kernel's name, for one whose CPU call is missing.
	kernelName string
}

type kSpan struct {
	tid        string
	start, end int64
	name       string
	step       int32
}

type kLaunch struct {
	tid string
	ts  int64
}

type kinetoFile struct {
	in       *input
	id       int
	rank     int
	world    int
	hasDist  bool
	backend  string
	nccl     string
	base     int64
	hasBase  bool
	gpuDev   bool
	pid      int64
	kernels  []*kComm
	cpuComms []*kComm
	annots   []*kComm
	c10d     []*kComm
	launches map[int64]kLaunch
	steps    []kSpan
	minTs    int64
	hasTs    bool
	gpuSeen  bool
	cpuOps   int64
	other    int64
	legacy   bool  // a bare JSON array: the profiler's export without Kineto
	torch    int64 // events only PyTorch writes (aten::, c10d::, ...)
	err      error
	s        *sink
	r        *run
	gpuSpool *spool
	cpuSpool *spool
}

var ncclKernelRE = regexp.MustCompile(`^(?:void )?(?:nccl|msccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)((?:_[A-Za-z0-9]+)*)`)

// ncclKernelAlgos are the algorithm names NCCL puts in its kernels' names
// (ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_AllReduce_Sum_f32_TREE_LL).
var ncclKernelAlgos = map[string]string{"RING": "ring", "TREE": "tree", "COLLNET": "collnet", "COLLNETDIRECT": "collnet_direct",
	"COLLNETCHAIN": "collnet_chain", "NVLS": "nvls", "NVLSTREE": "nvls_tree", "PAT": "pat"}

func importKineto(ctx context.Context, ins []*input, s *sink, r *run, opt *Options) error {
	var files []*kinetoFile
	for i, in := range ins {
		kf := &kinetoFile{in: in, id: i, rank: -1, launches: map[int64]kLaunch{}, s: s, r: r}
		if err := kf.read(); err != nil {
			return err
		}
		files = append(files, kf)
		if ctx.Err() != nil {
			break
		}
	}
	return kinetoFinish(files, r)
}

func (kf *kinetoFile) read() error {
	c := newChromeReader(kf.in)
	c.onKey = kf.key
	if err := c.start(0, "PyTorch profiler trace"); err != nil {
		return err
	}
	kf.legacy = c.bare
	var ev chromeEvent
	for c.next(&ev) {
		kf.event(&ev)
		if kf.err != nil {
			return kf.err
		}
	}
	if kf.legacy && kf.torch == 0 {
		if c.end != "" && c.events == 0 {
			return notFormat(kf.in.path, 0, c.dec.InputOffset(), "not a PyTorch profiler trace: %s", c.end)
		}
		return notFormat(kf.in.path, 0, 0, "not a PyTorch profiler trace: a JSON array of %d events, none of them PyTorch's (no aten::, c10d::, nccl:, gloo:, record_param_comms or ProfilerStep# events)", c.events)
	}
	if n, what := c.trailing(); n > 0 {
		kf.r.skip("bytes after the end of the trace's JSON (ignored)", n)
		kf.r.missingf("%s: %s", kf.in.path, what)
	}
	if !c.sawEvents {
		if c.end != "" {
			return notFormat(kf.in.path, 0, c.dec.InputOffset(), "not a PyTorch profiler trace: %s before any traceEvents", c.end)
		}
		return notFormat(kf.in.path, 0, 0, "not a PyTorch profiler trace: the JSON object has no traceEvents")
	}
	kf.r.skip("events whose fields have unexpected types", c.typeErrs)
	if c.end != "" {
		kf.r.cut = append(kf.r.cut, fmt.Sprintf("%s: %s", kf.in.path, c.end))
		kf.r.missingf("the rest of %s: %s; everything before is imported", kf.in.path, c.end)
	}
	return nil
}

// key reads the top-level members besides traceEvents.
func (kf *kinetoFile) key(key string, dec *json.Decoder) error {
	switch key {
	case "distributedInfo":
		var d struct {
			Rank      *int   `json:"rank"`
			WorldSize int    `json:"world_size"`
			Backend   string `json:"backend"`
			NCCL      string `json:"nccl_version"`
		}
		if err := dec.Decode(&d); err != nil {
			kf.r.skip("unreadable distributedInfo", 1)
			return nil
		}
		if d.Rank != nil && *d.Rank >= 0 && *d.Rank < maxRanks {
			kf.rank, kf.hasDist = *d.Rank, true
		}
		if d.WorldSize > 0 && d.WorldSize <= maxRanks {
			kf.world = d.WorldSize
		}
		kf.backend, kf.nccl = d.Backend, d.NCCL
	case "deviceProperties":
		var d []json.RawMessage
		if err := dec.Decode(&d); err == nil && len(d) > 0 {
			kf.gpuDev = true
		}
	case "baseTimeNanoseconds":
		var n json.Number
		if err := dec.Decode(&n); err == nil {
			if v, err := n.Int64(); err == nil {
				kf.base, kf.hasBase = v, true
			}
		}
	default:
		var skip json.RawMessage
		return dec.Decode(&skip)
	}
	return nil
}

func (kf *kinetoFile) emit(e trace.Event, cpu bool) {
	if kf.err != nil {
		return
	}
	sp := &kf.gpuSpool
	id := 2 * kf.id
	if cpu {
		sp, id = &kf.cpuSpool, 2*kf.id+1
	}
	if *sp == nil {
		*sp, kf.err = kf.s.stream(id, trace.RankInfo{Rank: 0})
		if kf.err != nil {
			return
		}
	}
	kf.err = (*sp).add(e)
}

func (kf *kinetoFile) event(ev *chromeEvent) {
	if ev.Ph != "X" {
		return // metadata, flows, instants
	}
	ts, ok1 := micros(ev.Ts)
	dur, ok2 := micros(ev.Dur)
	if !ok1 || !ok2 || dur < 0 {
		kf.r.skip("spans without a readable ts or dur", 1)
		return
	}
	if !kf.hasTs || ts < kf.minTs {
		kf.minTs, kf.hasTs = ts, true
	}
	cat := strings.ToLower(ev.Cat)
	if cat == "" && kf.legacy {
		cat = "cpu_op" // the legacy profiler's export names no category
	}
	tid := idText(ev.Tid)
	var a kArgs
	parse := func() {
		if len(ev.Args) > 0 && json.Unmarshal(ev.Args, &a) != nil {
			kf.r.skip("events with unreadable args", 1)
		}
	}
	switch cat {
	case "kernel":
		kf.gpuSeen = true
		parse()
		lname := strings.ToLower(ev.Name)
		if a.CollName == "" && !strings.HasPrefix(lname, "nccl") && !strings.HasPrefix(lname, "msccl") && !strings.HasPrefix(lname, "rccl") && !strings.HasPrefix(lname, "void nccl") {
			e := event(trace.KindCompute, 0, kernelName(ev.Name))
			e.Start, e.Dur = ts, dur
			kf.emit(e, false)
			return
		}
		k := kf.comm(&a, ts, dur, tid)
		k.gpu, k.kernelName = true, ev.Name
		if m := ncclKernelRE.FindStringSubmatch(ev.Name); m != nil {
			if k.op == "" {
				k.op = opName(m[1])
			}
			for _, part := range strings.Split(m[2], "_") {
				if a, ok := ncclKernelAlgos[part]; ok {
					k.algo = a
				}
			}
		}
		if k.op == "" {
			k.op = "unknown"
		}
		kf.kernels = append(kf.kernels, k)
	case "gpu_memcpy", "memcpy", "gpu_memset", "memset":
		kf.gpuSeen = true
		e := event(trace.KindCompute, 0, ev.Name)
		e.Start, e.Dur = ts, dur
		kf.emit(e, false)
	case "cuda_runtime", "runtime":
		if !strings.Contains(ev.Name, "Launch") {
			return
		}
		parse()
		if c, ok := num(a.Correlation); ok {
			kf.launches[c] = kLaunch{tid, ts}
		}
	case "cpu_op", "operator", "user_annotation":
		if torchName(ev.Name) {
			kf.torch++
		}
		if kf.pid == 0 {
			kf.pid, _ = idInt(ev.Pid)
		}
		switch {
		case strings.HasPrefix(ev.Name, "ProfilerStep#"):
			n, err := strconv.ParseInt(strings.TrimPrefix(ev.Name, "ProfilerStep#"), 10, 32)
			if err != nil {
				n = -1
			}
			kf.steps = append(kf.steps, kSpan{tid: tid, start: ts, end: ts + dur, name: ev.Name, step: int32(n)})
		case ev.Name == "record_param_comms":
			parse()
			k := kf.comm(&a, ts, dur, tid)
			k.cpuStart = ts
			kf.cpuComms = append(kf.cpuComms, k)
		case commAnnotation(ev.Name):
			parse()
			k := kf.comm(&a, ts, dur, tid)
			k.cpuStart = ts
			k.op = opName(ev.Name)
			k.annotations = ev.Name
			k.bytes, k.dtype = inputBytes(a.InputDims, a.InputType)
			kf.annots = append(kf.annots, k)
		case strings.HasPrefix(ev.Name, "c10d::"), strings.HasPrefix(ev.Name, "ProcessGroup"):
			// The c10d call around the collective: communication, not
			// compute; it says when the rank entered the call.
			if op := opName(ev.Name); strings.HasPrefix(ev.Name, "c10d::") && collectiveOps[op] {
				k := &kComm{start: ts, end: ts + dur, cpuStart: ts, seq: -1, tid: tid, extID: -1, corr: -1, op: op}
				kf.c10d = append(kf.c10d, k)
			}
		default:
			kf.cpuOps++
			e := event(trace.KindCompute, 0, ev.Name)
			e.Start, e.Dur = ts, dur
			kf.emit(e, true)
		}
	default:
		kf.other++
	}
}

// comm makes a communication record from an event's args.
func (kf *kinetoFile) comm(a *kArgs, ts, dur int64, tid string) *kComm {
	k := &kComm{start: ts, end: ts + dur, cpuStart: -1, seq: -1, tid: tid, extID: -1, corr: -1}
	if a.CollName != "" {
		k.op, k.named = opName(a.CollName), true
	}
	k.extID, _ = num(a.ExternalID)
	if c, ok := num(a.Correlation); ok {
		k.corr = c
	}
	k.dtype = dtypeName(a.DType)
	in, _ := num(a.InNelems)
	out, _ := num(a.OutNelems)
	if sz := dtypeSize(k.dtype); sz > 0 {
		k.bytes = mulBytes(max(in, out), sz)
	}
	k.pgSize, _ = num(a.GroupSize)
	if len(a.PGName) > 0 {
		k.pg = idText(a.PGName)
	}
	k.pgDesc = a.PGDesc
	if len(a.PGRanks) > 0 {
		k.pgRanks = strings.ReplaceAll(idText(a.PGRanks), " ", "")
	}
	if s, ok := num(a.Seq); ok {
		k.seq = s
	}
	return k
}

// inputBytes returns the larger input's bytes of an old-style annotation
// from its Input Dims ([[394241]]) and Input type (["float"]).
func inputBytes(dimsRaw, typesRaw json.RawMessage) (int64, string) {
	var dims [][]int64
	var types []string
	if json.Unmarshal(dimsRaw, &dims) != nil || json.Unmarshal(typesRaw, &types) != nil {
		return 0, ""
	}
	var best int64
	dtype := ""
	for i, d := range dims {
		if i >= len(types) {
			break
		}
		dt := dtypeName(types[i])
		n := int64(1)
		for _, x := range d {
			if x < 0 || (x != 0 && n > (1<<62)/x) {
				n = 0
				break
			}
			n *= x
		}
		if b := mulBytes(n, dtypeSize(dt)); b > best {
			best, dtype = b, dt
		}
	}
	return best, dtype
}

// kernelName shortens a kernel's C++ signature to its name and template.
func kernelName(s string) string {
	if i := strings.IndexByte(s, '('); i > 0 {
		s = s[:i]
	}
	s = strings.TrimPrefix(s, "void ")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// kinetoFinish joins each file's communication records, numbers the
// calls and writes them, and fills the run.
func kinetoFinish(files []*kinetoFile, r *run) error {
	if len(files) == 0 {
		return nil
	}
	world := 0
	ranks := map[int]string{}
	noDist := 0
	for _, kf := range files {
		if !kf.hasDist {
			noDist++
		}
		world = max(world, kf.world)
	}
	// Ranks: from distributedInfo; files without it take the numbers no
	// other file claims, in file order.
	next := 0
	for _, kf := range files {
		if kf.hasDist {
			if prev, dup := ranks[kf.rank]; dup {
				return fmt.Errorf("%s and %s both hold rank %d (distributedInfo): import one run's files together", prev, kf.in.path, kf.rank)
			}
			ranks[kf.rank] = kf.in.path
		}
	}
	for _, kf := range files {
		if !kf.hasDist {
			for ranks[next] != "" {
				next++
			}
			kf.rank = next
			ranks[next] = kf.in.path
		}
	}
	for _, kf := range files {
		world = max(world, kf.rank+1)
	}
	if noDist > 0 {
		r.missingf("ranks of %d files: the traces hold no distributedInfo, so their files are numbered in name order", noDist)
	}
	// Each file's calls.
	perComm := map[string][][]string{} // comm -> per-file signature lists, for the order check
	totalCalls, gpuCalls, cpuCalls, lostKernels, waits := int64(0), int64(0), int64(0), int64(0), int64(0)
	var orphanKernels, orphanTime, collTime, unsized int64
	legacy := false
	ownSeq := true
	var epoch int64
	haveEpoch := false
	for _, kf := range files {
		if kf.hasTs {
			abs := kf.minTs + kf.base
			if !haveEpoch || abs < epoch {
				epoch, haveEpoch = abs, true
			}
		}
	}
	for _, kf := range files {
		calls, w, lost, orph := kf.calls(world)
		waits += w
		lostKernels += lost
		orphanKernels += orph
		for _, c := range calls {
			if c.op == "wait" {
				continue
			}
			collTime += c.end - c.start
			if c.gpu && c.op == "unknown" {
				orphanTime += c.end - c.start
			} else if c.bytes == 0 && c.op != "barrier" {
				unsized++
			}
		}
		// Number each group's calls in call order, unless the trace
		// numbered them.
		byComm := map[string][]*kComm{}
		for _, c := range calls {
			if c.op == "wait" {
				// A c10d wait names no collective: it takes no number.
				c.seq = -1
				continue
			}
			byComm[c.pg] = append(byComm[c.pg], c)
		}
		for comm, cs := range byComm {
			slices.SortStableFunc(cs, func(a, b *kComm) int { return cmp.Compare(callTime(a), callTime(b)) })
			own := true
			for _, c := range cs {
				own = own && c.seq >= 0
			}
			ownSeq = ownSeq && own
			var sig []string
			for i, c := range cs {
				if !own {
					c.seq = int64(i)
				}
				sig = append(sig, fmt.Sprintf("%s/%d", c.op, c.bytes))
			}
			perComm[comm] = append(perComm[comm], sig)
		}
		slices.SortStableFunc(calls, func(a, b *kComm) int { return cmp.Compare(a.start, b.start) })
		for _, c := range calls {
			switch {
			case c.op == "wait":
			case c.gpu:
				totalCalls++
				gpuCalls++
			default:
				totalCalls++
				cpuCalls++
			}
			e := event(trace.KindCollective, 0, c.op)
			if c.op == "wait" {
				e.Kind = trace.KindWait
			}
			e.Start, e.Dur, e.Bytes, e.DType, e.Algo, e.Seq, e.Comm, e.Label = c.start, c.end-c.start, c.bytes, c.dtype, c.algo, c.seq, c.pg, c.pgDesc
			if e.Label == "" {
				e.Label = c.annotations
			}
			e.Step = kf.stepAt(callTime(c))
			kf.emit(e, false)
		}
		for _, st := range kf.steps {
			e := event(trace.KindStep, 0, "step")
			e.Start, e.Dur, e.Step = st.start, st.end-st.start, st.step
			kf.emit(e, false)
		}
		if kf.err != nil {
			return kf.err
		}
		if kf.gpuSpool == nil && kf.cpuSpool == nil {
			// A file with no events to write still stands for its rank:
			// its stream is empty.
			if kf.gpuSpool, kf.err = kf.s.stream(2*kf.id, trace.RankInfo{Rank: 0}); kf.err != nil {
				return kf.err
			}
		}
		info := trace.RankInfo{Rank: kf.rank, WorldSize: world, PID: int(kf.pid)}
		shift := kf.base - epoch
		if kf.gpuSpool != nil {
			r.ranks[2*kf.id], r.shift[2*kf.id] = info, shift
		}
		// CPU operators are the rank's compute only when it has no GPU
		// activity: on a GPU rank the kernels are what overlaps
		// communication, and the CPU ops only launch them.
		if kf.cpuSpool != nil && !kf.gpuSeen {
			r.ranks[2*kf.id+1], r.shift[2*kf.id+1] = info, shift
		}
		if kf.nccl != "" {
			r.tool = "PyTorch profiler (Kineto), NCCL " + kf.nccl
		}
		legacy = legacy || kf.legacy
		if kf.backend != "" {
			r.config["backend"] = kf.backend
		}
	}
	if r.tool == "" {
		r.tool = "PyTorch profiler (Kineto)"
		if legacy {
			r.tool = "PyTorch profiler (export_chrome_trace without Kineto)"
		}
	}
	if unsized > 0 {
		r.missingf("the message size and dtype of %d collectives: the trace's records of them carry none (PyTorch's export without Kineto records no args; record_shapes=True adds Input Dims)", unsized)
	}
	r.world = world
	r.config["ranks"] = strconv.Itoa(world)
	if haveEpoch && epoch > 1e17 { // an absolute time, not a profiler-relative one
		r.start = time.Unix(0, epoch).UTC()
	}
	r.clock = trace.Clock{Method: "same-host"}
	if len(files) > 1 {
		r.missingf("clock alignment across hosts: each rank's times are its host's profiler clock, not corrected; ranks on different hosts may be offset by the hosts' clock difference")
	}
	if len(files) < world {
		r.missingf("%d of %d ranks: no trace file was given for them", world-len(files), world)
	}
	for comm, sigs := range perComm {
		if len(sigs) < 2 {
			continue
		}
		for _, s := range sigs[1:] {
			if !slices.Equal(s, sigs[0]) {
				r.missingf("matching calls across ranks on %s: the ranks' traces hold different call sequences (%d and %d calls, or other sizes), so calls matched by order may pair different collectives", comm, len(sigs[0]), len(s))
				break
			}
		}
	}
	if !ownSeq {
		r.missingf("the collectives' sequence numbers: the trace has none, so each process group's calls are numbered in call order on every rank")
	}
	var cpuDropped int64
	for _, kf := range files {
		if kf.gpuSeen {
			cpuDropped += kf.cpuOps
		}
	}
	if cpuDropped > 0 {
		r.missingf("CPU operators (%d) as compute: on GPU ranks the kernels are the compute that overlaps communication; the CPU ops only launch them and are not imported", cpuDropped)
	}
	if lostKernels > 0 {
		r.missingf("the GPU kernels of %d collectives called on the CPU: they lie outside the profiled window, so those calls are not imported", lostKernels)
	}
	if orphanKernels > 0 {
		r.missingf("the op and size of %d collectives (%s of the collectives' time): their NCCL kernels' CPU calls are not in the trace (outside the profiled window, or no record_param_comms), so they are collectives of op \"unknown\" and unknown size, labelled with the kernel's name", orphanKernels, units.Percent(float64(orphanTime)/float64(max(collTime, 1)), 1))
	}
	r.missingf("the messages of NCCL inside each collective: not in the trace")
	r.summaryf("%d ranks, %d collectives (%d timed by their GPU kernel, %d by their CPU call), %d waits", len(files), totalCalls, gpuCalls, cpuCalls, waits)
	return nil
}

func callTime(c *kComm) int64 {
	if c.cpuStart >= 0 {
		return c.cpuStart
	}
	return c.start
}

func (kf *kinetoFile) stepAt(t int64) int32 {
	for _, st := range kf.steps {
		if t >= st.start && t < st.end {
			return st.step
		}
	}
	return -1
}

// calls joins a file's records into collectives, one per call: the CPU
// call (record_param_comms), the process group's annotation
// (nccl:all_reduce, gloo:all_reduce, ...) and the c10d op around them are
// one call, timed on the CPU from the rank's entry into it to the end of
// its work; its NCCL kernel, when there is one, times it on the GPU. A
// kernel whose CPU call is missing and whose own args name no collective
// is a collective of unknown op and size. CPU calls without a kernel
// stand alone only on ranks that ran no NCCL kernel. It returns the
// calls, the waits among them, the CPU calls whose kernel is missing and
// the kernels whose CPU call is.
func (kf *kinetoFile) calls(world int) (calls []*kComm, waits, lost, orphans int64) {
	// The annotation inside (or, in older traces, around) its
	// record_param_comms; older record_param_comms name no collective.
	pairCPU(kf.cpuComms, kf.annots, func(o, i *kComm) bool { return o.op == "" || o.op == i.op }, func(o, i *kComm) {
		i.parent = o
		o.annotations = i.annotations
		if o.op == "" {
			o.op = i.op
		}
		if o.bytes == 0 && i.bytes > 0 {
			o.bytes, o.dtype = i.bytes, i.dtype
		}
		o.start, o.end = min(o.start, i.start), max(o.end, i.end)
		o.cpuStart = min(o.cpuStart, i.start)
	})
	// The records that stand for calls on the CPU.
	var cpu []*kComm
	for _, c := range kf.cpuComms {
		if c.op != "" && c.op != "wait" {
			cpu = append(cpu, c)
		}
	}
	for _, a := range kf.annots {
		if a.parent == nil {
			cpu = append(cpu, a)
		}
	}
	// The c10d op around a call says when the rank entered it.
	pairCPU(kf.c10d, cpu, func(o, i *kComm) bool { return o.op == i.op }, func(o, i *kComm) {
		o.parent = i
		i.start, i.end = min(i.start, o.start), max(i.end, o.end)
		i.cpuStart = min(i.cpuStart, o.start)
	})
	root := func(c *kComm) *kComm {
		for c.parent != nil {
			c = c.parent
		}
		return c
	}
	link := func(k, c *kComm) {
		c.linked = true
		if k.cpuStart < 0 || c.cpuStart < k.cpuStart {
			k.cpuStart = c.cpuStart
		}
		if !k.named && c.op != "" {
			k.op = c.op
		}
		if k.bytes == 0 && c.bytes > 0 {
			k.bytes, k.dtype = c.bytes, c.dtype
		}
		if k.pg == "" {
			k.pg, k.pgDesc, k.pgSize, k.pgRanks = c.pg, c.pgDesc, c.pgSize, c.pgRanks
		}
		if k.seq < 0 {
			k.seq = c.seq
		}
		if k.annotations == "" {
			k.annotations = c.annotations
		}
	}
	byExt := map[int64]*kComm{}
	for _, c := range kf.cpuComms {
		if c.extID >= 0 {
			byExt[c.extID] = c
		}
	}
	for _, k := range kf.kernels {
		if c := byExt[k.extID]; c != nil && k.extID >= 0 && !c.linked {
			link(k, c)
		}
	}
	// The kernel's launch lies inside its annotation on the same thread:
	// older traces have nothing else to say what a kernel did
	// (nccl:all_to_all runs as SendRecv kernels).
	for _, k := range kf.kernels {
		if k.corr < 0 {
			continue
		}
		l, ok := kf.launches[k.corr]
		if !ok {
			continue
		}
		for _, a := range kf.annots {
			if c := root(a); !c.linked && a.tid == l.tid && l.ts >= a.start && l.ts <= a.end {
				link(k, c)
				break
			}
		}
	}
	for _, k := range kf.kernels {
		if !k.named && k.cpuStart < 0 {
			// Neither its args nor a CPU call say what it did: the
			// kernel's name is not enough (NCCL runs all_to_all as
			// SendRecv, and newer versions name every kernel alike).
			orphans++
			k.op, k.bytes, k.dtype = "unknown", 0, ""
			k.annotations = kernelName(k.kernelName)
		}
		kf.commName(k, world)
		calls = append(calls, k)
	}
	gpu := len(kf.kernels) > 0
	for _, c := range kf.cpuComms {
		if c.op == "wait" {
			waits++
			kf.commName(c, world)
			calls = append(calls, c)
		}
	}
	for _, c := range cpu {
		if c.linked {
			continue
		}
		if gpu {
			lost++
			continue
		}
		kf.commName(c, world)
		calls = append(calls, c)
	}
	// c10d ops alone: the call's only record (no process group record).
	for _, c := range kf.c10d {
		if c.parent != nil {
			continue
		}
		if gpu {
			lost++
			continue
		}
		kf.commName(c, world)
		calls = append(calls, c)
	}
	return calls, waits, lost, orphans
}

// commName names a call's communicator: world for the default process
// group (PyTorch's group "0", "default_pg"), pg/<name> for the others,
// even one spanning every rank: it is another communicator, numbering its
// calls apart.
func (kf *kinetoFile) commName(c *kComm, world int) {
	switch {
	case c.pgDesc == "default_pg", c.pgDesc == "" && (c.pg == "" || c.pg == "0"):
		c.pg = "world"
	default:
		name := c.pg
		if name == "" {
			name = c.pgDesc
		}
		c.pg = "pg/" + name
	}
	if c.pgDesc == "" && c.pgRanks != "" {
		c.pgDesc = "ranks " + c.pgRanks
	}
}

// commBackends are the prefixes of the record functions PyTorch's process
// groups wrap each collective in (nccl:all_reduce, gloo:all_reduce,
// mpi:all_reduce, ...), from PyTorch 1.8 on.
var commBackends = []string{"nccl:", "gloo:", "mpi:", "rccl:", "ucc:", "xccl:", "hccl:"}

// commAnnotation reports whether a CPU event is a process group's record
// of a collective.
func commAnnotation(name string) bool {
	for _, p := range commBackends {
		if strings.HasPrefix(name, p) {
			return collectiveOps[opName(name)]
		}
	}
	return false
}

// collectiveOps are the operations a CPU record may stand for.
var collectiveOps = map[string]bool{"allreduce": true, "allgather": true, "reducescatter": true, "alltoall": true, "broadcast": true,
	"reduce": true, "barrier": true, "send": true, "recv": true, "gather": true, "scatter": true, "sendrecv": true}

// pairCPU joins the records of two lists that stand for one call (a
// record_param_comms and the process group's annotation, or a call and
// the c10d op around it): on one thread, the one that contains the other;
// then, across threads (gloo runs a collective on a thread of its own), in
// call order per operation: each remaining inner record takes the
// earliest remaining outer record that began before it. join is called
// with the outer (the call's own record) and the inner.
func pairCPU(outer, inner []*kComm, ok func(o, i *kComm) bool, join func(o, i *kComm)) {
	byTid := map[string][]*kComm{}
	for _, o := range outer {
		byTid[o.tid] = append(byTid[o.tid], o)
	}
	for _, l := range byTid {
		slices.SortStableFunc(l, func(a, b *kComm) int { return cmp.Compare(a.start, b.start) })
	}
	used := map[*kComm]bool{}
	done := map[*kComm]bool{}
	for _, in := range inner {
		l := byTid[in.tid]
		i, _ := slices.BinarySearchFunc(l, in.start, func(o *kComm, t int64) int { return cmp.Compare(o.start, t+1) })
		for _, j := range []int{i - 1, i} {
			if j < 0 || j >= len(l) || used[l[j]] || !ok(l[j], in) {
				continue
			}
			o := l[j]
			// One begins inside the other (a call's record may already
			// extend past the op around it to the end of its work).
			if o.start <= in.start && in.start <= o.end || in.start <= o.start && o.start <= in.end {
				used[o], done[in] = true, true
				join(o, in)
				break
			}
		}
	}
	// Across threads, in order.
	var os, is []*kComm
	for _, o := range outer {
		if !used[o] {
			os = append(os, o)
		}
	}
	for _, in := range inner {
		if !done[in] {
			is = append(is, in)
		}
	}
	slices.SortStableFunc(os, func(a, b *kComm) int { return cmp.Compare(a.start, b.start) })
	slices.SortStableFunc(is, func(a, b *kComm) int { return cmp.Compare(a.start, b.start) })
	for _, in := range is {
		for _, o := range os {
			if o.start > in.start {
				break
			}
			if !used[o] && o.tid != in.tid && ok(o, in) {
				used[o] = true
				join(o, in)
				break
			}
		}
	}
}

// torchName reports whether an operator's name is one only PyTorch
// writes.
func torchName(name string) bool {
	for _, p := range []string{"aten::", "c10d::", "record_param_comms", "ProfilerStep#", "autograd::", "Optimizer."} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return commAnnotation(name)
}
