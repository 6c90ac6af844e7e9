package importers

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/commprof/commprof/trace"
)

// NCCL debug logs (NCCL_DEBUG=INFO or TRACE; NCCL_DEBUG_SUBSYS must include
// COLL for the per-call lines, INIT for the communicators) are text, one
// line per message, prefixed "host:pid:tid [cudaDev] NCCL INFO " (TRACE
// lines add a time and the source location; API traces are "host:pid:tid
// NCCL CALL ncclAllReduce(...)"). NCCL_DEBUG_TIMESTAMP_FORMAT adds a
// bracketed time in front. Several processes often write one file, so
// lines interleave, get cut, or overwrite each other.
//
// What is read:
//   - per-call lines: "<Op>: opCount <hex> sendbuff <p> recvbuff <p> count
//     <n> datatype <t> op <o> root <r> comm <p> [nranks=<n>] stream <p>";
//   - the algorithm chosen for the call: "<Op>: <n> Bytes -> Algo <a>
//     proto <p> ...";
//   - communicator creation: "... comm <p> rank <r> nranks <n> ...
//     commId <id> - Init START|COMPLETE", which gives each process's rank;
//   - "NCCL CALL nccl<Op>(...)" lines, only to count calls whose per-call
//     line was lost.
//
// Only intact lines are used; a damaged line is counted, never repaired.
// The per-call lines carry no time, so an import without timestamps
// places each call at its opCount in µs with no duration (the counts,
// sizes, communicators and algorithms are what such a log holds).

var (
	nlTimeRE  = regexp.MustCompile(`^\[([^\]]{6,40})\] `)
	nlPrefix  = regexp.MustCompile(`^([A-Za-z0-9._-]+):(\d+):(\d+) (?:\[(\d+)\] (?:([0-9]+\.[0-9]+) \S+:\d+ )?NCCL (INFO|WARN|TRACE|ABORT) |NCCL (CALL) )`)
	nlInside  = regexp.MustCompile(`([A-Za-z0-9._-]+):\d+:\d+ (?:\[\d+\] (?:[0-9]+\.[0-9]+ \S+:\d+ )?NCCL (?:INFO|WARN|TRACE|ABORT) |NCCL CALL )`)
	nlCallRE  = regexp.MustCompile(`^(\w+): opCount ([0-9a-f]+) sendbuff (0x[0-9a-f]+|\(nil\)) recvbuff (0x[0-9a-f]+|\(nil\)) count (\d+) datatype (\d+) op (\d+) root (-?\d+) comm (0x[0-9a-f]+) \[nranks=(\d+)\] stream (0x[0-9a-f]+|\(nil\))\s*$`)
	nlAlgoRE  = regexp.MustCompile(`^(\w+): (\d+) Bytes -> Algo (\w+) proto (\w+)`)
	nlInitRE  = regexp.MustCompile(`\bcomm (0x[0-9a-f]+) rank (\d+) nranks (\d+) (.*)- Init (?:START|COMPLETE)\s*$`)
	nlCommID  = regexp.MustCompile(`commId (0x[0-9a-f]+)`)
	nlVersion = regexp.MustCompile(`NCCL version (\S+)`)
	nlAPIRE   = regexp.MustCompile(`^nccl(\w+)\((.*)\)\s*$`)
)

// ncclAlgos are NCCL_ALGO's values, for older logs that print numbers.
var ncclAlgos = []string{"tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"}

type nlCall struct {
	op      string
	opCount int64
	// sub is the call's index among its communicator's calls of the same
	// opCount and kind (collective or point-to-point), in the order
	// written: NCCL 2.12 and later give every call launched in one group
	// the group's opCount.
	sub    int
	count  int64
	dtype  int
	redop  int
	root   int
	nranks int
	algo   string
	ts     int64 // ns since the epoch, -1 unknown
	tid    int64
	paired bool
	line   int64  // the line it was read from
	key    string // thread and text, to find a line repeated byte for byte
}

type nlComm struct {
	ptr    string
	rank   int // -1 unknown
	nranks int
	id     string // commId, "" unknown
	calls  []*nlCall
	// group counts the calls per opCount: [0] collectives, [1]
	// point-to-point (filled by number).
	group map[int64]*[2]int
	name  string
}

type nlProc struct {
	key   string
	host  string
	pid   int
	order int
	comms map[string]*nlComm
	// per thread: the calls whose NCCL CALL line has not been seen, and
	// the CALL lines whose per-call line has not (a few of each)
	pendingCalls map[int64][]*nlCall
	pendingAPI   map[int64][]nlAPI
	last         map[int64]*nlCall // the thread's last call, for its algorithm line
	rank         int
	world        int
	records      int64          // records read with this prefix
	tids         map[int64]bool // the threads that wrote them
}

type nlAPI struct {
	op    string
	count int64
	comm  string
}

type ncclLog struct {
	r       *run
	procs   map[string]*nlProc
	order   []*nlProc
	version string
	lines   int64
	other   int64
	damaged int64
	withTS  int64
	calls   int64
	dups    int64
	orphans int64
	tooLong int64
}

func importNCCLLog(ctx context.Context, ins []*input, s *sink, r *run, opt *Options) error {
	l := &ncclLog{r: r, procs: map[string]*nlProc{}}
	for _, in := range ins {
		if err := l.read(in); err != nil {
			return err
		}
		if ctx.Err() != nil {
			break
		}
	}
	l.resolveHosts()
	l.number()
	if l.calls == 0 {
		if len(l.procs) == 0 {
			return notFormat(ins[0].path, 1, 0, "not an NCCL debug log: no line starts with NCCL's host:pid:tid prefix")
		}
		return notFormat(ins[0].path, 1, 0, "an NCCL debug log without per-call lines (\"AllReduce: opCount ...\"): run with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS including COLL")
	}
	return l.finish(s)
}

// read reads one log file line by line.
func (l *ncclLog) read(in *input) error {
	var line []byte
	var lineNo int64
	for {
		chunk, err := in.r.ReadSlice('\n')
		if len(chunk) > 0 {
			if len(line)+len(chunk) <= 1<<16 {
				line = append(line, chunk...)
			} else if len(line) <= 1<<16 {
				l.tooLong++
				line = append(line[:0], "\x00"...) // marks the line as too long to read
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(line) > 0 {
			lineNo++
			if err == io.EOF && cutLine(line) {
				l.r.cut = append(l.r.cut, fmt.Sprintf("%s: the file ends inside line %d (no newline after it)", in.path, lineNo))
			}
			text := strings.TrimRight(string(line), "\r\n")
			if err != nil && err != io.EOF {
				text = "" // a line broken by a read error is not read
			}
			if text != "\x00" {
				l.line(text, lineNo)
				if len(l.procs) > 0 {
					in.found()
				}
			}
			line = line[:0]
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			l.r.cut = append(l.r.cut, fmt.Sprintf("%s: %s at line %d", in.path, readErr(err), lineNo))
			l.r.missingf("the rest of %s: %s at line %d; the lines before are imported", in.path, readErr(err), lineNo)
			return nil
		}
	}
}

// line reads one physical line. Processes writing one file splice their
// lines: a line may hold the head of one process's line followed by
// another's whole line ("...localRank 3 -> stone:2029567:2029567 [2] NCCL
// INFO AllReduce: ..."), or the tail of a line whose head was written
// before. Every record prefix (host:pid:tid ...) in the line starts a
// record; a record followed by another on the same line was cut by it and
// is not read, nor is text before the first prefix. Only the last record
// of a line runs to its own newline and is read, when it parses whole.
// A host glued to the fragment before it ("con" + "stone") is told apart
// at the end, against the hosts the same process writes elsewhere.
func (l *ncclLog) line(text string, lineNo int64) {
	l.lines++
	var locs [][]int
	if strings.Contains(text, "NCCL ") { // every record prefix holds it; the regexp is slow on long lines
		locs = nlInside.FindAllStringIndex(text, -1)
	}
	starts := make([]int, 0, len(locs))
	for _, loc := range locs {
		at := loc[0]
		// The record's own "[time] " goes with it.
		if i := strings.LastIndexByte(text[:at], '['); i >= 0 {
			if m := nlTimeRE.FindStringIndex(text[i:]); m != nil && i+m[1] == at {
				at = i
			}
		}
		starts = append(starts, at)
	}
	if len(starts) == 0 {
		if m := nlTimeRE.FindStringIndex(text); m != nil {
			text = text[m[1]:]
		}
		if strings.Contains(text, "NCCL") || strings.Contains(text, "opCount") || strings.Contains(text, "nranks=") {
			l.damaged++ // the tail of an NCCL line whose head was cut off
		} else if strings.TrimSpace(text) != "" {
			l.other++
		}
		return
	}
	if head := text[:starts[0]]; strings.TrimSpace(head) != "" {
		// The head of a line cut by the record written after it.
		l.damaged++
	}
	l.damaged += int64(len(starts) - 1) // records cut by the next one
	l.record(text[starts[len(starts)-1]:], lineNo)
}

// record reads one record that runs to the end of its line.
func (l *ncclLog) record(text string, lineNo int64) {
	var ts int64 = -1
	if m := nlTimeRE.FindStringSubmatch(text); m != nil {
		if t, ok := parseLogTime(m[1]); ok {
			ts = t
		}
		text = text[len(m[0]):]
	}
	m := nlPrefix.FindStringSubmatch(text)
	if m == nil {
		l.damaged++
		return
	}
	body := text[len(m[0]):]
	pid, err1 := strconv.Atoi(m[2])
	tid, err2 := strconv.ParseInt(m[3], 10, 64)
	if err1 != nil || err2 != nil {
		l.damaged++
		return
	}
	p := l.proc(m[1], pid)
	p.records++
	p.tids[tid] = true
	if m[7] == "CALL" {
		l.api(p, tid, body)
		return
	}
	switch {
	case strings.Contains(body, "opCount"):
		c := nlCallRE.FindStringSubmatch(body)
		if c == nil {
			l.damaged++
			return
		}
		l.call(p, tid, c, ts, lineNo)
	case strings.Contains(body, "Bytes -> Algo"):
		if a := nlAlgoRE.FindStringSubmatch(body); a != nil {
			if last := p.last[tid]; last != nil && last.algo == "" && opName(a[1]) == last.op {
				last.algo = algoName(a[3])
			}
		}
	case strings.Contains(body, "Init START") || strings.Contains(body, "Init COMPLETE"):
		if i := nlInitRE.FindStringSubmatch(body); i != nil {
			rank, err1 := strconv.Atoi(i[2])
			nranks, err2 := strconv.Atoi(i[3])
			if err1 != nil || err2 != nil || nranks <= 0 || nranks > maxRanks || rank >= nranks {
				l.damaged++
				return
			}
			cm := p.comm(i[1])
			cm.rank, cm.nranks = rank, nranks
			if id := nlCommID.FindStringSubmatch(i[4]); id != nil {
				cm.id = id[1]
			}
		}
	case strings.Contains(body, "NCCL version"):
		if v := nlVersion.FindStringSubmatch(body); v != nil && l.version == "" {
			l.version = v[1]
		}
	}
}

// parseLogTime reads NCCL_DEBUG_TIMESTAMP_FORMAT's common layouts.
func parseLogTime(s string) (int64, bool) {
	for _, layout := range []string{"2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05", "2006-01-02T15:04:05Z07:00"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixNano(), true
		}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > 1e8 && f < 1e11 { // seconds since the Unix epoch
		return int64(f * 1e9), true
	}
	return 0, false
}

func algoName(s string) string {
	if n, err := strconv.Atoi(s); err == nil {
		if n >= 0 && n < len(ncclAlgos) {
			return ncclAlgos[n]
		}
		return ""
	}
	return strings.ToLower(s)
}

func (l *ncclLog) proc(host string, pid int) *nlProc {
	key := host + ":" + strconv.Itoa(pid)
	p := l.procs[key]
	if p == nil {
		p = &nlProc{key: key, host: host, pid: pid, order: len(l.order), comms: map[string]*nlComm{}, rank: -1,
			pendingCalls: map[int64][]*nlCall{}, pendingAPI: map[int64][]nlAPI{}, last: map[int64]*nlCall{}, tids: map[int64]bool{}}
		l.procs[key] = p
		l.order = append(l.order, p)
	}
	return p
}

// p2p reports whether c is a Send or Recv.
func (c *nlCall) p2p() bool { return c.op == "send" || c.op == "recv" }

func (p *nlProc) comm(ptr string) *nlComm {
	c := p.comms[ptr]
	if c == nil {
		c = &nlComm{ptr: ptr, rank: -1, group: map[int64]*[2]int{}}
		p.comms[ptr] = c
	}
	return c
}

func (l *ncclLog) call(p *nlProc, tid int64, m []string, ts int64, lineNo int64) {
	opCount, err1 := strconv.ParseInt(m[2], 16, 64)
	count, err2 := strconv.ParseInt(m[5], 10, 64)
	dtype, _ := strconv.Atoi(m[6])
	redop, _ := strconv.Atoi(m[7])
	root, _ := strconv.Atoi(m[8])
	nranks, _ := strconv.Atoi(m[10])
	if err1 != nil || err2 != nil || nranks <= 0 || nranks > maxRanks || root >= maxRanks {
		l.damaged++
		return
	}
	cm := p.comm(m[9])
	if cm.nranks == 0 {
		cm.nranks = nranks
	}
	c := &nlCall{op: opName(m[1]), opCount: opCount, count: count, dtype: dtype, redop: redop, root: root, nranks: nranks, ts: ts, tid: tid,
		line: lineNo, key: strconv.FormatInt(tid, 10) + " " + m[0]}
	cm.calls = append(cm.calls, c)
	p.last[tid] = c
	// A CALL line seen first pairs now; else this call waits for one.
	apis := p.pendingAPI[tid]
	for i, a := range apis {
		if a.op == c.op && a.count == c.count && a.comm == m[9] {
			p.pendingAPI[tid] = append(apis[:i:i], apis[i+1:]...)
			c.paired = true
			return
		}
	}
	pc := append(p.pendingCalls[tid], c)
	if len(pc) > 4 {
		pc = pc[len(pc)-4:]
	}
	p.pendingCalls[tid] = pc
}

// api reads an "NCCL CALL nccl<Op>(...)" line: it pairs with its per-call
// line; one that never pairs is a call whose per-call line was lost.
func (l *ncclLog) api(p *nlProc, tid int64, body string) {
	m := nlAPIRE.FindStringSubmatch(body)
	if m == nil {
		l.damaged++
		return
	}
	op := opName(m[1])
	switch op {
	case "allreduce", "allgather", "reducescatter", "broadcast", "reduce", "alltoall", "send", "recv", "gather", "scatter":
	default:
		return // group and communicator calls
	}
	args := strings.Split(m[2], ",")
	if len(args) < 4 {
		l.damaged++
		return
	}
	count, err := strconv.ParseInt(strings.TrimSpace(args[2]), 10, 64)
	if err != nil {
		l.damaged++
		return
	}
	comm := ""
	for _, a := range args {
		if a = strings.TrimSpace(a); strings.HasPrefix(a, "0x") && comm == "" {
			comm = a
		}
	}
	// The first 0x pointer of ncclAllReduce(send, recv, count, dtype, op,
	// root, comm, stream) is the communicator: buffers print without 0x.
	pcs := p.pendingCalls[tid]
	for i, c := range pcs {
		if !c.paired && c.op == op && c.count == count {
			c.paired = true
			p.pendingCalls[tid] = append(pcs[:i:i], pcs[i+1:]...)
			return
		}
	}
	pa := append(p.pendingAPI[tid], nlAPI{op: op, count: count, comm: comm})
	if len(pa) > 4 {
		l.orphans += int64(len(pa) - 4)
		pa = pa[len(pa)-4:]
	}
	p.pendingAPI[tid] = pa
}

// resolveHosts finds the records whose host was glued to the fragment
// written before it ("con" + "stone" reads "constone") or lost its first
// characters to another process's line ("one"): a process is told by its
// pid, and the host it writes most is its own. A record of the same pid
// and thread whose host ends with that host is the process's, with a
// fragment before it; one whose host is the end of that host is a cut
// record, counted and not read. Neither makes a process, a rank or a
// host.
func (l *ncclLog) resolveHosts() {
	byPID := map[int][]*nlProc{}
	for _, p := range l.order {
		byPID[p.pid] = append(byPID[p.pid], p)
	}
	gone := map[*nlProc]bool{}
	for _, ps := range byPID {
		if len(ps) < 2 {
			continue
		}
		sort.SliceStable(ps, func(i, j int) bool { return ps[i].records > ps[j].records })
		for i, v := range ps {
			if gone[v] {
				continue
			}
			for _, g := range ps[:i] {
				if gone[g] || !shareThread(g, v) {
					continue
				}
				switch {
				case strings.HasSuffix(v.host, g.host):
					g.absorb(v)
				case strings.HasSuffix(g.host, v.host):
					l.damaged += v.records
				default:
					continue
				}
				gone[v] = true
				delete(l.procs, v.key)
				break
			}
		}
	}
	if len(gone) == 0 {
		return
	}
	kept := l.order[:0]
	for _, p := range l.order {
		if !gone[p] {
			p.order = len(kept)
			kept = append(kept, p)
		}
	}
	l.order = kept
}

func shareThread(a, b *nlProc) bool {
	for t := range b.tids {
		if a.tids[t] {
			return true
		}
	}
	return false
}

// absorb takes v's records as p's: v is p with a fragment glued to its
// host.
func (p *nlProc) absorb(v *nlProc) {
	p.records += v.records
	for ptr, vc := range v.comms {
		c := p.comm(ptr)
		c.calls = append(c.calls, vc.calls...)
		slices.SortStableFunc(c.calls, func(a, b *nlCall) int { return cmp.Compare(a.line, b.line) })
		if c.rank < 0 && vc.rank >= 0 {
			c.rank, c.nranks, c.id = vc.rank, vc.nranks, vc.id
		}
		if c.nranks == 0 {
			c.nranks = vc.nranks
		}
	}
}

// number drops the per-call lines repeated byte for byte and numbers the
// calls of each opCount: calls launched in one group share the group's
// opCount (NCCL 2.12 and later), each a call of its own.
func (l *ncclLog) number() {
	for _, p := range l.order {
		for _, cm := range p.comms {
			seen := map[string]bool{}
			kept := cm.calls[:0]
			for _, c := range cm.calls {
				if seen[c.key] {
					l.dups++
					continue
				}
				seen[c.key] = true
				g := cm.group[c.opCount]
				if g == nil {
					g = &[2]int{}
					cm.group[c.opCount] = g
				}
				k := 0
				if c.p2p() {
					k = 1
				}
				c.sub = g[k]
				g[k]++
				if c.ts >= 0 {
					l.withTS++
				}
				kept = append(kept, c)
			}
			clear(cm.calls[len(kept):])
			cm.calls = kept
			l.calls += int64(len(kept))
		}
	}
}

// finish resolves every process's rank and communicators and writes the
// calls.
func (l *ncclLog) finish(s *sink) error {
	r := l.r
	for _, p := range l.order {
		for _, pa := range p.pendingAPI {
			l.orphans += int64(len(pa))
		}
	}
	// Communicators by commId: which ranks of each are known.
	type known struct {
		nranks int
		ranks  map[int]*nlComm
	}
	byID := map[string]*known{}
	for _, p := range l.order {
		for _, cm := range p.comms {
			if cm.id == "" || cm.rank < 0 {
				continue
			}
			k := byID[cm.id]
			if k == nil {
				k = &known{nranks: cm.nranks, ranks: map[int]*nlComm{}}
				byID[cm.id] = k
			}
			k.ranks[cm.rank] = cm
		}
	}
	// A communicator whose creation line is lost: it is the one known
	// communicator of its size with exactly one rank unclaimed, when its
	// calls agree, opCount by opCount, with that communicator's.
	var inferred []string
	for _, p := range l.order {
		for _, cm := range p.comms {
			if cm.rank >= 0 || len(cm.calls) == 0 {
				continue
			}
			var cand []string
			for id, k := range byID {
				if k.nranks == cm.nranks && len(k.ranks) == k.nranks-1 {
					cand = append(cand, id)
				}
			}
			if len(cand) != 1 {
				continue
			}
			k := byID[cand[0]]
			missing := -1
			for rk := range k.nranks {
				if k.ranks[rk] == nil {
					missing = rk
				}
			}
			agree, common := true, 0
			type callKey struct {
				opCount int64
				p2p     bool
				sub     int
			}
			for _, other := range k.ranks {
				byOp := map[callKey]*nlCall{}
				for _, c := range other.calls {
					byOp[callKey{c.opCount, c.p2p(), c.sub}] = c
				}
				for _, c := range cm.calls {
					if o := byOp[callKey{c.opCount, c.p2p(), c.sub}]; o != nil {
						common++
						if o.op != c.op || o.count != c.count || o.dtype != c.dtype || o.redop != c.redop || o.root != c.root && c.op != "send" && c.op != "recv" {
							agree = false
						}
					}
				}
			}
			if !agree || common == 0 || missing < 0 {
				continue
			}
			cm.id, cm.rank = cand[0], missing
			k.ranks[missing] = cm
			inferred = append(inferred, fmt.Sprintf("process %s's communicator %s is rank %d of %s: its creation line is lost, and it is the only unclaimed rank of that %d-rank communicator, whose %d calls in common it matches in op, count and datatype",
				p.key, cm.ptr, missing, cand[0], k.nranks, common))
		}
	}
	// A process's rank is its rank on its largest known communicator.
	world := 0
	for _, p := range l.order {
		best := -1
		for _, cm := range p.comms {
			if cm.rank >= 0 && cm.nranks > best {
				best, p.rank, p.world = cm.nranks, cm.rank, cm.nranks
			}
		}
		world = max(world, p.world)
	}
	used := map[int]string{}
	var unknown []string
	for _, p := range l.order {
		if p.rank >= 0 {
			if prev, dup := used[p.rank]; dup {
				return fmt.Errorf("processes %s and %s both hold rank %d of their largest communicator: import one job's logs at a time", prev, p.key, p.rank)
			}
			used[p.rank] = p.key
		}
	}
	next := 0
	for _, p := range l.order {
		if p.rank < 0 {
			for used[next] != "" {
				next++
			}
			p.rank = next
			used[next] = p.key
			unknown = append(unknown, fmt.Sprintf("%s as rank %d", p.key, p.rank))
		}
		world = max(world, p.rank+1)
	}
	// Communicator names: world for one spanning every rank.
	for _, p := range l.order {
		for _, cm := range p.comms {
			switch {
			case cm.id != "" && cm.nranks == world:
				cm.name = "world"
			case cm.id != "":
				cm.name = "comm/" + cm.id
			default:
				cm.name = "comm/" + p.key + "/" + cm.ptr // known to this process only
			}
		}
	}
	timed := l.withTS == l.calls
	var epoch int64 = -1
	if timed {
		for _, p := range l.order {
			for _, cm := range p.comms {
				for _, c := range cm.calls {
					if epoch < 0 || c.ts < epoch {
						epoch = c.ts
					}
				}
			}
		}
		r.start = time.Unix(0, epoch).UTC()
	}
	// Calls of one group share an opCount: seq is opCount × scale + the
	// call's index among its group's collectives, scale the power of ten
	// above the largest group (1 when no group held two collectives), so
	// that seq is unique and the same on every rank.
	scale, groups, grouped := int64(1), 0, 0
	for _, p := range l.order {
		for _, cm := range p.comms {
			for _, g := range cm.group {
				for scale < int64(g[0]) {
					scale *= 10
				}
				if g[0]+g[1] > 1 {
					groups++
					grouped += g[0] + g[1]
				}
			}
		}
	}
	byOp := map[string]int64{}
	for _, p := range l.order {
		sp, err := s.stream(p.order, trace.RankInfo{Rank: p.rank, WorldSize: world, Host: p.host, PID: p.pid})
		if err != nil {
			return err
		}
		r.ranks[p.order] = trace.RankInfo{Rank: p.rank, WorldSize: world, Host: p.host, PID: p.pid}
		ptrs := make([]string, 0, len(p.comms))
		for k := range p.comms {
			ptrs = append(ptrs, k)
		}
		sort.Strings(ptrs)
		for _, ptr := range ptrs {
			cm := p.comms[ptr]
			for _, c := range cm.calls {
				e := event(trace.KindCollective, p.rank, c.op)
				e.Seq, e.Comm = c.opCount*scale+int64(c.sub), cm.name
				dt := ""
				if c.dtype >= 0 && c.dtype < len(ncclDataTypes) {
					dt = ncclDataTypes[c.dtype]
				}
				e.DType, e.Algo = dt, c.algo
				e.Bytes = collBytes(c.op, c.count, dtypeSize(dt), c.nranks)
				switch c.op {
				case "broadcast", "reduce":
					e.Root = int32(c.root)
				case "send", "recv":
					e.Kind = map[string]trace.Kind{"send": trace.KindSend, "recv": trace.KindRecv}[c.op]
					e.Name, e.Peer, e.Seq = "sendrecv", int32(c.root), -1
				}
				if timed {
					e.Start = c.ts - epoch
				} else {
					e.Start = c.opCount*1000 + int64(c.sub)*1000/scale
				}
				byOp[e.Name]++
				if err := sp.add(e); err != nil {
					return err
				}
			}
		}
	}
	r.world = world
	r.config["ranks"] = strconv.Itoa(world)
	r.tool = "NCCL debug log"
	if l.version != "" {
		r.tool = "NCCL " + l.version + " debug log"
	}
	r.skip("NCCL lines cut or overwritten by another process's (not read)", l.damaged)
	r.skip("per-call lines repeated byte for byte (the first is kept)", l.dups)
	r.skip("calls seen only in their NCCL CALL line: their per-call line is lost", l.orphans)
	r.skip("lines longer than 64 KiB (not read)", l.tooLong)
	if !timed {
		r.untimed = true
		r.missingf("times: NCCL's per-call lines carry none, so each call is placed at its opCount (in µs) on every rank, with no duration; the run's span, communication time, arrival skew, waits, stragglers and bandwidths are unknown (set NCCL_DEBUG_TIMESTAMP_FORMAT and NCCL_DEBUG_TIMESTAMP_LEVELS=INFO for times)")
	} else {
		r.noDurations = true
		r.missingf("durations: NCCL's per-call lines mark when a call was made, not when it completed, so every call has no duration and communication time, waits, stragglers and bandwidths are unknown; arrival skew is from the lines' times, which have the resolution of NCCL_DEBUG_TIMESTAMP_FORMAT")
	}
	for _, s := range inferred {
		r.missingf("%s", s)
	}
	if groups > 0 {
		r.summaryf("%d calls in %d groups (calls launched together share an opCount)", grouped, groups)
	}
	if scale > 1 {
		r.missingf("the order of calls launched in one group: they share an opCount (NCCL 2.12 and later), so each collective's seq is opCount × %d + its index among its group's collectives in the order the log wrote them (NCCL requires every rank to launch collectives in one order)", scale)
	}
	if len(unknown) > 0 {
		r.missingf("ranks of processes without a communicator creation line (NCCL_DEBUG_SUBSYS without INIT, or the line was lost): numbered after the known ranks, %s; their communicators cannot be matched with other processes'", strings.Join(unknown, ", "))
	}
	l.losses(scale > 1 || groups > 0)
	r.missingf("compute, steps and the messages inside each collective: not in NCCL's log")
	var ops []string
	for _, o := range sortedKeys(byOp) {
		ops = append(ops, fmt.Sprintf("%d %s", byOp[o], o))
	}
	var procs []string
	for _, p := range l.order {
		n := 0
		for _, cm := range p.comms {
			n += len(cm.calls)
		}
		procs = append(procs, fmt.Sprintf("%s (rank %d): %d", p.key, p.rank, n))
	}
	r.summaryf("%d calls recovered (%s) from %d lines: %s", l.calls, strings.Join(ops, ", "), l.lines, strings.Join(procs, ", "))
	if l.damaged+l.orphans > 0 {
		r.summaryf("%d damaged NCCL lines skipped; %d calls known only from their NCCL CALL line", l.damaged, l.orphans)
	}
	return nil
}

// losses says which calls each process's log lost: the opCounts missing
// between its first and last recovered one on a communicator, and those
// before its first and after its last that other ranks of the
// communicator recorded (a process whose first lines another overwrote,
// one whose log was cut). grouped says whether an opCount may stand for
// several calls.
func (l *ncclLog) losses(grouped bool) {
	unit := "calls"
	if grouped {
		unit = "opCounts (each a call or a group of calls)"
	}
	type span struct{ lo, hi int64 }
	spanOf := func(cm *nlComm) span {
		sp := span{cm.calls[0].opCount, cm.calls[0].opCount}
		for _, c := range cm.calls {
			sp.lo, sp.hi = min(sp.lo, c.opCount), max(sp.hi, c.opCount)
		}
		return sp
	}
	union := map[string]span{}
	for _, p := range l.order {
		for _, cm := range p.comms {
			if len(cm.calls) == 0 {
				continue
			}
			sp := spanOf(cm)
			if u, ok := union[cm.name]; ok {
				sp = span{min(u.lo, sp.lo), max(u.hi, sp.hi)}
			}
			union[cm.name] = sp
		}
	}
	var gaps int64
	for _, p := range l.order {
		ptrs := sortedKeys(p.comms)
		for _, ptr := range ptrs {
			cm := p.comms[ptr]
			if len(cm.calls) == 0 {
				continue
			}
			sp, u := spanOf(cm), union[cm.name]
			gaps += sp.hi - sp.lo + 1 - int64(len(cm.group))
			if n := sp.lo - u.lo; n > 0 {
				l.r.missingf("rank %d (%s) on %s: the %d %s before its first recovered opCount (%x), which other ranks recorded from opCount %x: their lines are lost", p.rank, p.key, cm.name, n, unit, sp.lo, u.lo)
			}
			if n := u.hi - sp.hi; n > 0 {
				l.r.missingf("rank %d (%s) on %s: the %d %s after its last recovered opCount (%x), which other ranks recorded up to opCount %x: their lines are lost", p.rank, p.key, cm.name, n, unit, sp.hi, u.hi)
			}
		}
	}
	if gaps > 0 {
		l.r.missingf("%d %s between communicators' first and last recovered opCount: their lines are lost", gaps, unit)
	}
}

// collBytes returns a call's bytes as nccl-tests counts them: the whole
// buffer, which for allgather is the output (count is per rank) and for
// reducescatter the input (count is the per-rank output).
func collBytes(op string, count, size int64, nranks int) int64 {
	b := mulBytes(count, size)
	switch op {
	case "allgather", "reducescatter":
		return mulBytes(b, int64(max(nranks, 1)))
	}
	return b
}
