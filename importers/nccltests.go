package importers

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/commprof/commprof/internal/busbw"
	"io"
	"math"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/trace"
)

// nccl-tests (github.com/NVIDIA/nccl-tests, all_reduce_perf and friends)
// print a header (the test's parameters, one "#  Rank N Group G Pid P on
// HOST device D [bus] NAME" line per rank; newer versions also "#
// nccl-tests version ..." and "# Collective test starting: X_perf"), a
// table with one row per message size:
//
//	size count type redop root | out-of-place time algbw busbw #wrong | in-place time algbw busbw #wrong
//
// (time in µs, bandwidths in GB/s) and "# Avg bus bandwidth : x".
//
// Mapping: a benchmark run. For each row, iters × agg iters calls, each
// on every rank at once, back to back, lasting the row's out-of-place
// time, with bytes = size (nccl-tests' whole buffer): commprof's algbw
// and busbw of each size are then the table's. The test's parameters go
// in config (benchmark=nccl-tests, op, ranks, iters, ...).

var (
	ntStartRE   = regexp.MustCompile(`^#\s*Collective test starting:\s*(\S+)`)
	ntVersionRE = regexp.MustCompile(`^#\s*nccl-tests version (\S+)`)
	ntParamsRE  = regexp.MustCompile(`^#\s*nThread\s+\d+`)
	ntRankRE    = regexp.MustCompile(`^#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)`)
	ntAvgRE     = regexp.MustCompile(`^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+)`)
	ntOOBRE     = regexp.MustCompile(`^#\s*Out of bounds values\s*:\s*(\d+)`)
	ntHeaderRE  = regexp.MustCompile(`^#\s*size\s+count\s+type\s`)
	ntKVRE      = regexp.MustCompile(`([A-Za-z][A-Za-z ]*?):?\s+(\d+)(?:\((\w+)\))?`)
	// NCCL's INFO line when NCCL_ALGO is set ("NCCL INFO NCCL_ALGO set by
	// environment to Ring"), printed by every rank with NCCL_DEBUG=INFO.
	ntAlgoRE = regexp.MustCompile(`NCCL_ALGO set by environment to\s+(\S+)`)
)

// maxTestEvents bounds the events an nccl-tests table becomes.
const maxTestEvents = 4 << 20

type ntRow struct {
	size, count int64
	dtype       string
	redop       string
	root        int
	timeNs      int64
	algbw       float64
	busbw       float64
	wrong       string
	line        int64
}

type ntRank struct {
	host   string
	pid    int
	device int
}

func importNCCLTests(ctx context.Context, ins []*input, s *sink, r *run, opt *Options) error {
	if len(ins) != 1 {
		return fmt.Errorf("an nccl-tests import is one output file (one test); got %d files", len(ins))
	}
	in := ins[0]
	var (
		cols                      map[string]int
		rows                      []ntRow
		ranks                     = map[int]ntRank{}
		params                    = map[string]string{}
		testName, version         string
		avg                       = -1.0
		oob                       int64
		lineNo, damaged, nonTable int64
		algoSet                   = map[string]bool{} // NCCL_ALGO's values as printed
	)
	for {
		raw, err := readLine(in.r, 1<<16)
		if len(raw) > 0 {
			lineNo++
		}
		line := strings.TrimRight(string(raw), "\r\n")
		t := strings.TrimSpace(line)
		if m := ntAlgoRE.FindStringSubmatch(t); m != nil {
			algoSet[m[1]] = true
		}
		switch {
		case t == "":
		case strings.HasPrefix(t, "#"):
			if ntStartRE.MatchString(t) || ntVersionRE.MatchString(t) || ntParamsRE.MatchString(t) || ntRankRE.MatchString(t) || ntHeaderRE.MatchString(t) {
				in.found()
			}
			switch {
			case ntStartRE.MatchString(t):
				testName = ntStartRE.FindStringSubmatch(t)[1]
			case ntVersionRE.MatchString(t):
				version = ntVersionRE.FindStringSubmatch(t)[1]
			case ntParamsRE.MatchString(t):
				for _, m := range ntKVRE.FindAllStringSubmatch(strings.TrimPrefix(t, "#"), -1) {
					params[strings.TrimSpace(m[1])] = m[2]
				}
			case ntRankRE.MatchString(t):
				m := ntRankRE.FindStringSubmatch(t)
				rk, _ := strconv.Atoi(m[1])
				pid, _ := strconv.Atoi(m[2])
				dev, _ := strconv.Atoi(m[4])
				if rk < maxRanks {
					ranks[rk] = ntRank{host: m[3], pid: pid, device: dev}
				}
			case ntAvgRE.MatchString(t):
				avg, _ = strconv.ParseFloat(ntAvgRE.FindStringSubmatch(t)[1], 64)
			case ntOOBRE.MatchString(t):
				oob, _ = strconv.ParseInt(ntOOBRE.FindStringSubmatch(t)[1], 10, 64)
			default:
				f := strings.Fields(strings.TrimPrefix(t, "#"))
				if len(f) >= 7 && f[0] == "size" && f[1] == "count" && f[2] == "type" {
					cols = map[string]int{"": len(f)} // "" holds the column count
					for i, name := range f {
						if _, seen := cols[name]; !seen {
							cols[name] = i
						}
					}
				}
			}
		case cols != nil && len(t) > 0 && t[0] >= '0' && t[0] <= '9':
			row, ok := ntParseRow(strings.Fields(t), cols)
			if !ok {
				damaged++
				break
			}
			row.line = lineNo
			rows = append(rows, row)
		default:
			nonTable++ // NCCL or MPI messages printed among the results
		}
		if err == io.EOF {
			if cutLine(raw) {
				r.cut = append(r.cut, fmt.Sprintf("%s: the file ends inside line %d (no newline after it)", in.path, lineNo))
			}
			break
		}
		if err != nil {
			r.cut = append(r.cut, fmt.Sprintf("%s: %s at line %d", in.path, readErr(err), lineNo))
			r.missingf("the rest of %s: %s at line %d; the rows before are imported", in.path, readErr(err), lineNo)
			break
		}
	}
	if cols == nil {
		return notFormat(in.path, lineNo, 0, "not nccl-tests output: no \"# size count type ...\" table header")
	}
	if len(rows) == 0 {
		return notFormat(in.path, lineNo, 0, "nccl-tests output without any result row")
	}
	world := 0
	for rk := range ranks {
		world = max(world, rk+1)
	}
	if world == 0 {
		return &InputError{File: in.path, Line: 1, Msg: "the output lists no ranks (\"#  Rank N Group G Pid P on HOST ...\" lines): the rank count, which busbw depends on, is unknown"}
	}
	op, how, err := ntOp(testName, opt.Op, rows, world, in.path)
	if err != nil {
		return err
	}
	algo, algoHow := ntAlgo(algoSet, op)
	iters := int64(1)
	if v, ok := params["iters"]; ok {
		iters, _ = strconv.ParseInt(v, 10, 64)
	}
	if v, ok := params["agg iters"]; ok {
		if a, err := strconv.ParseInt(v, 10, 64); err == nil && a > 0 {
			iters *= a
		}
	}
	iters = min(max(iters, 1), 1<<16)
	measured := iters
	// Each call is the row's mean time, so fewer calls give the same
	// algbw and busbw: a table of many ranks and sizes is written with
	// fewer calls per size rather than millions of events.
	if total := iters * int64(world) * int64(len(rows)); total > maxTestEvents {
		reduced := max(1, maxTestEvents/(int64(world)*int64(len(rows))))
		r.missingf("calls: %d per size instead of the %d measured, to keep the run to %d events (each call is the size's mean time, so bandwidths are unchanged)", reduced, iters, maxTestEvents)
		iters = reduced
	}
	// Every rank calls back to back: call k of every rank starts when
	// call k-1 ends.
	spools := make([]*spool, world)
	for rk := range world {
		info := trace.RankInfo{Rank: rk, WorldSize: world, Host: ranks[rk].host, PID: ranks[rk].pid}
		sp, err := s.stream(rk, info)
		if err != nil {
			return err
		}
		spools[rk] = sp
		r.ranks[rk] = info
	}
	var t, seq, wrongRows int64
	dtypes := map[string]bool{}
	redops := map[string]bool{}
	for _, row := range rows {
		if row.wrong != "0" && row.wrong != "N/A" && row.wrong != "" {
			wrongRows++
		}
		dt := dtypeName(row.dtype)
		dtypes[row.dtype] = true
		redops[row.redop] = true
		for range iters {
			for rk := range world {
				e := event(trace.KindCollective, rk, op)
				e.Start, e.Dur, e.Bytes, e.Seq, e.Comm, e.DType, e.Algo = t, row.timeNs, row.size, seq, "world", dt, algo
				if row.root >= 0 && (op == "broadcast" || op == "reduce") {
					e.Root = int32(row.root)
				}
				if err := spools[rk].add(e); err != nil {
					return err
				}
			}
			t += row.timeNs
			seq++
		}
	}
	r.world = world
	r.clock = trace.Clock{Method: "same-host"}
	r.tool = "nccl-tests"
	if version != "" {
		r.tool += " " + version
	}
	if testName != "" {
		r.tool += " " + testName
	}
	r.config["benchmark"] = "nccl-tests"
	r.config["op"] = op
	r.config["ranks"] = strconv.Itoa(world)
	r.config["iters"] = strconv.FormatInt(measured, 10)
	if v, ok := params["warmup iters"]; ok {
		r.config["warmup_iters"] = v
	}
	for _, k := range []string{"nThread", "nGpus", "minBytes", "maxBytes", "validation", "graph"} {
		if v, ok := params[k]; ok {
			r.config[strings.ToLower(k)] = v
		}
	}
	if len(dtypes) == 1 {
		for d := range dtypes {
			r.config["dtype"] = dtypeName(d)
		}
	}
	if len(redops) == 1 {
		for o := range redops {
			r.config["redop"] = o
		}
	}
	hosts := map[string]bool{}
	for _, rk := range ranks {
		hosts[rk.host] = true
	}
	r.config["hosts"] = strconv.Itoa(len(hosts))
	if avg >= 0 {
		r.metrics["avg_busbw_gbps"] = avg
	}
	r.skip("result rows that do not parse (cut or damaged)", damaged)
	if oob > 0 {
		r.missingf("%d values nccl-tests reports out of bounds", oob)
	}
	if wrongRows > 0 {
		r.missingf("correct results: %d sizes report wrong results (#wrong), their times are imported as printed", wrongRows)
	}
	if how != "" {
		r.missingf("%s", how)
	}
	r.missingf("per-call times: the table holds each size's mean time, so every call is given that time, on every rank at once, back to back; arrival skew, waits and the spread of times are not in the table")
	r.missingf("in-place results: the run reproduces the out-of-place columns only")
	if algoHow != "" {
		r.missingf("%s", algoHow)
	} else {
		r.config["algo"] = algo
	}
	r.missingf("protocol and the messages inside each collective: not in the table")
	r.summaryf("%s on %d ranks (%d hosts): %d sizes from %s to %s, %d calls each", op, world, len(hosts), len(rows), units.Bytes(rows[0].size), units.Bytes(rows[len(rows)-1].size), iters)
	if algoHow == "" {
		r.summaryf("algorithm %s, as NCCL_ALGO set it", algo)
	} else {
		r.summaryf("algorithm not named: the model assumes %s", standardShape(op))
	}
	return nil
}

// ntParseRow reads a result row by the header's columns; the first time,
// algbw and busbw are the out-of-place ones.
func ntParseRow(f []string, cols map[string]int) (ntRow, bool) {
	get := func(name string) (string, bool) {
		i, ok := cols[name]
		if !ok || i >= len(f) {
			return "", false
		}
		return f[i], true
	}
	var row ntRow
	var err error
	sz, ok1 := get("size")
	cnt, ok2 := get("count")
	typ, ok3 := get("type")
	tm, ok4 := get("time")
	alg, ok5 := get("algbw")
	bus, ok6 := get("busbw")
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
		return row, false
	}
	// The row must be whole: as many fields as the header names (a cut
	// last row could otherwise read "0.0" for "0.00").
	if len(f) < cols[""] {
		return row, false
	}
	if row.size, err = strconv.ParseInt(sz, 10, 64); err != nil || row.size < 0 {
		return row, false
	}
	if row.count, err = strconv.ParseInt(cnt, 10, 64); err != nil || row.count < 0 {
		return row, false
	}
	row.dtype = typ
	row.redop, _ = get("redop")
	row.root = -1
	if v, ok := get("root"); ok {
		if row.root, err = strconv.Atoi(v); err != nil {
			return row, false
		}
	}
	ns, ok := micros(json.Number(tm))
	if !ok || ns <= 0 {
		return row, false
	}
	row.timeNs = ns
	if row.algbw, err = strconv.ParseFloat(alg, 64); err != nil {
		return row, false
	}
	if row.busbw, err = strconv.ParseFloat(bus, 64); err != nil {
		return row, false
	}
	if v, ok := get("#wrong"); ok {
		row.wrong = v
	} else if v, ok := get("error"); ok {
		row.wrong = v
	}
	return row, true
}

// ntOp decides which collective a table measured: from the test's name,
// or --op, or from the table itself (busbw/algbw is the op's nccl-tests
// factor; size/count/type size is 1 or the rank count; redop none; root),
// using the file's name only to choose among the ops the table allows.
func ntOp(testName, given string, rows []ntRow, n int, path string) (op, how string, err error) {
	if testName != "" {
		return opName(strings.TrimSuffix(testName, "_perf")), "", nil
	}
	// What the table says.
	var ratio float64
	best := 0.0
	for _, rw := range rows {
		if rw.algbw >= 1 && rw.algbw > best { // two decimals: only large values give the factor
			best, ratio = rw.algbw, rw.busbw/rw.algbw
		}
	}
	fAR, fAG := busbw.Factor("allreduce", n), busbw.Factor("allgather", n)
	near := func(a, b float64) bool { return math.Abs(a-b) <= 0.02*b }
	last := rows[len(rows)-1]
	per := float64(0)
	if sz := dtypeSize(dtypeName(last.dtype)); sz > 0 && last.count > 0 {
		per = float64(last.size) / float64(last.count*sz)
	}
	none := last.redop == "none"
	var cands []string
	add := func(ops ...string) { cands = append(cands, ops...) }
	switch {
	case per > 1.5 || (ratio > 0 && near(ratio, fAG) && !near(fAG, 1)):
		if none {
			add("allgather", "alltoall")
		} else {
			add("reducescatter")
		}
	case ratio > 0 && near(ratio, fAR) && !near(fAR, 1):
		add("allreduce")
	case last.root >= 0:
		if none {
			add("broadcast")
		} else {
			add("reduce")
		}
	default:
		add("allreduce", "sendrecv") // on 2 ranks their factors are both 1
	}
	if given != "" {
		g := opName(given)
		for _, c := range cands {
			if c == g {
				return g, fmt.Sprintf("the collective: the output does not name it; --op %s agrees with the table", g), nil
			}
		}
		return "", "", fmt.Errorf("%s: --op %s does not fit the table (its busbw/algbw ratio %.3f, redop %s, root %d on %d ranks allow %s)", path, given, ratio, last.redop, last.root, n, strings.Join(cands, " or "))
	}
	if len(cands) == 1 {
		return cands[0], fmt.Sprintf("the collective: the output does not name it; the table shows %s (busbw/algbw %.3f on %d ranks, redop %s, root %d)", cands[0], ratio, n, last.redop, last.root), nil
	}
	base := strings.ToLower(filepath.Base(path))
	var hits []string
	for _, c := range cands {
		if ntSpellings[c] != nil && ntSpellings[c].MatchString(base) {
			hits = append(hits, c)
		}
	}
	sort.Strings(hits)
	if len(hits) == 1 {
		return hits[0], fmt.Sprintf("the collective: neither the output nor the table names it (the table allows %s); taken from the file name %s", strings.Join(cands, " or "), filepath.Base(path)), nil
	}
	return "", "", fmt.Errorf("%s: the output does not say which collective it measured and the table allows %s: pass --op", path, strings.Join(cands, " or "))
}

// ntSpellings find an op's name in a file name: all_reduce_perf,
// allreduce.log; "reduce" alone, not inside all_reduce or reduce_scatter.
var ntSpellings = map[string]*regexp.Regexp{
	"allreduce":     regexp.MustCompile(`all_?reduce`),
	"allgather":     regexp.MustCompile(`all_?gather`),
	"reducescatter": regexp.MustCompile(`reduce_?scatter`),
	"alltoall":      regexp.MustCompile(`all_?to_?all`),
	"broadcast":     regexp.MustCompile(`broadcast|bcast`),
	"reduce":        regexp.MustCompile(`(?:^|[^a-z_])reduce(?:_perf)?(?:[^a-z_]|$)`),
	"sendrecv":      regexp.MustCompile(`send_?recv`),
}

// ntAlgo returns the algorithm every call of op ran with, when the output
// names one: NCCL_ALGO set to a single algorithm (for op, in NCCL's
// per-op syntax "allreduce:tree;broadcast:ring"). Otherwise the calls'
// algo is trace.AlgoUnknown and how says why, for the source's missing.
func ntAlgo(set map[string]bool, op string) (algo, how string) {
	unknown := func(why string) (string, string) {
		return trace.AlgoUnknown, fmt.Sprintf("algorithm: %s, so every call's algo is %q; the alpha-beta model (predict, the report's model) assumes %s", why, trace.AlgoUnknown, standardShape(op))
	}
	if len(set) == 0 {
		return unknown("the output does not name it (no \"NCCL_ALGO set by environment\" line: NCCL_DEBUG=INFO with NCCL_ALGO set prints one)")
	}
	vals := sortedKeys(set)
	if len(vals) > 1 {
		return unknown(fmt.Sprintf("the ranks set NCCL_ALGO differently (%s)", strings.Join(vals, ", ")))
	}
	list := ""
	for _, part := range strings.Split(vals[0], ";") {
		if o, l, ok := strings.Cut(part, ":"); ok {
			if opName(o) == op {
				list = l
				break
			}
		} else if list == "" {
			list = part
		}
	}
	names := strings.Split(list, ",")
	if list == "" || strings.HasPrefix(list, "^") || len(names) != 1 {
		return unknown(fmt.Sprintf("NCCL_ALGO=%s leaves NCCL a choice for %s", vals[0], op))
	}
	a := strings.ToLower(names[0])
	switch a {
	case "collnetdirect":
		a = "collnet_direct"
	case "collnetchain":
		a = "collnet_chain"
	case "nvlstree":
		a = "nvls_tree"
	}
	return a, ""
}

// standardShape says which cost shape analyses assume for an op whose
// algorithm is trace.AlgoUnknown.
func standardShape(op string) string {
	switch op {
	case "allreduce", "allgather", "reducescatter":
		return "a ring for " + op
	case "broadcast", "reduce":
		return "a tree for " + op
	}
	return "no shape for " + op + " (the model does not cover it)"
}
