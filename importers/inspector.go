package importers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/commprof/commprof/trace"
)

// NCCL Inspector (the profiler plugin in NCCL's ext-profiler/inspector,
// NCCL_PROFILER_PLUGIN=libnccl-profiler-inspector.so NCCL_INSPECTOR_ENABLE=1)
// writes JSON Lines, one file per process, one object per completed
// collective per communicator:
//
//	{"header": {"id": "<comm hash>", "rank": r, "n_ranks": n, "nnodes": k},
//	 "metadata": {"inspector_output_format_version": "v4.0", "dump_timestamp_us": t,
//	              "hostname": h, "pid": p, ...},
//	 "coll_perf": {"coll": "AllReduce", "coll_sn": s, "coll_msg_size_bytes": b,
//	               "coll_exec_time_us": d, "coll_timing_source": "kernel_gpu",
//	               "coll_algobw_gbs": a, "coll_busbw_gbs": bb,
//	               "event_trace_ts": {...}}}   (event_trace_* with NCCL_INSPECTOR_DUMP_VERBOSE=1)
//
// The dump thread writes what completed since its last pass, so the time
// of a record is when it was dumped, not when the collective ran; verbose
// output carries the collective's and its kernels' own times. The
// message size is per rank for AllGather and ReduceScatter (the plugin
// multiplies by n_ranks for its bandwidths), the whole buffer otherwise.
//
// Mapping: one collective event per record: seq = coll_sn on communicator
// header.id, bytes the whole buffer (msg × n_ranks for allgather and
// reducescatter), duration = coll_exec_time_us, so that commprof's algbw
// and busbw equal the plugin's; start = the first kernel's start in
// verbose output, else the dump time minus the execution time.

type inspRecord struct {
	Header struct {
		ID     string `json:"id"`
		Rank   *int   `json:"rank"`
		NRanks int    `json:"n_ranks"`
		NNodes int    `json:"nnodes"`
	} `json:"header"`
	Metadata struct {
		Version  string `json:"inspector_output_format_version"`
		DumpUs   int64  `json:"dump_timestamp_us"`
		Hostname string `json:"hostname"`
		PID      int    `json:"pid"`
	} `json:"metadata"`
	CollPerf *struct {
		Coll    string  `json:"coll"`
		SN      *int64  `json:"coll_sn"`
		Bytes   int64   `json:"coll_msg_size_bytes"`
		ExecUs  int64   `json:"coll_exec_time_us"`
		Source  string  `json:"coll_timing_source"`
		AlgoBW  float64 `json:"coll_algobw_gbs"`
		BusBW   float64 `json:"coll_busbw_gbs"`
		TraceTs *struct {
			CollStart int64 `json:"coll_start_ts"`
			CollStop  int64 `json:"coll_stop_ts"`
			Kernels   []struct {
				Start int64 `json:"kernel_start_ts"`
				Stop  int64 `json:"kernel_stop_ts"`
			} `json:"kernel_events"`
		} `json:"event_trace_ts"`
	} `json:"coll_perf"`
}

type inspCall struct {
	op       string
	sn       int64
	bytes    int64
	start    int64 // µs since the Unix epoch
	dur      int64 // µs
	source   string
	comm     string
	commRank int
	nranks   int
	estimate bool
}

type inspProc struct {
	key   string
	host  string
	pid   int
	order int
	calls []inspCall
	comms map[string][2]int // comm id -> rank, n_ranks
	seen  map[string]bool   // comm/sn
	rank  int
}

func importInspector(ctx context.Context, ins []*input, s *sink, r *run, opt *Options) error {
	procs := map[string]*inspProc{}
	var order []*inspProc
	var records, damaged, notColl, dups int64
	versions := map[string]bool{}
	sources := map[string]int64{}
	for _, in := range ins {
		var lineNo, good int64
		br := in.r
		for {
			line, err := readLine(br, 1<<20)
			if len(line) > 0 {
				lineNo++
			}
			if t := bytes.TrimSpace(line); len(t) > 0 {
				var rec inspRecord
				switch uerr := json.Unmarshal(t, &rec); {
				case uerr != nil && good == 0 && lineNo <= 1:
					return notFormat(in.path, lineNo, 0, "not NCCL Inspector output: the first line is not a JSON object (%v)", uerr)
				case uerr != nil:
					damaged++
				case rec.CollPerf == nil:
					if good == 0 && lineNo == 1 {
						return notFormat(in.path, lineNo, 0, "not NCCL Inspector output: the first object has no coll_perf")
					}
					notColl++
				case rec.Header.Rank == nil || rec.CollPerf.SN == nil || rec.Header.ID == "" || rec.CollPerf.ExecUs < 0 || rec.Header.NRanks <= 0 || *rec.Header.Rank < 0 || *rec.Header.Rank >= rec.Header.NRanks || rec.Header.NRanks > maxRanks:
					damaged++
				default:
					good++
					in.found()
					key := rec.Metadata.Hostname + ":" + strconv.Itoa(rec.Metadata.PID)
					p := procs[key]
					if p == nil {
						p = &inspProc{key: key, host: rec.Metadata.Hostname, pid: rec.Metadata.PID, order: len(order),
							comms: map[string][2]int{}, seen: map[string]bool{}, rank: -1}
						procs[key] = p
						order = append(order, p)
					}
					cp := rec.CollPerf
					k := rec.Header.ID + "/" + strconv.FormatInt(*cp.SN, 10)
					if p.seen[k] {
						dups++
						break
					}
					p.seen[k] = true
					records++
					p.comms[rec.Header.ID] = [2]int{*rec.Header.Rank, rec.Header.NRanks}
					c := inspCall{op: opName(cp.Coll), sn: *cp.SN, bytes: cp.Bytes, dur: cp.ExecUs, source: cp.Source,
						comm: rec.Header.ID, commRank: *rec.Header.Rank, nranks: rec.Header.NRanks}
					if c.op == "allgather" || c.op == "reducescatter" {
						c.bytes = mulBytes(cp.Bytes, int64(rec.Header.NRanks))
					}
					switch tt := cp.TraceTs; {
					case tt != nil && len(tt.Kernels) > 0:
						c.start = tt.Kernels[0].Start
						for _, kk := range tt.Kernels {
							if kk.Start > 0 {
								c.start = min(c.start, kk.Start)
							}
						}
					case tt != nil && tt.CollStart > 0:
						c.start = tt.CollStart
					default:
						c.start, c.estimate = rec.Metadata.DumpUs-cp.ExecUs, true
					}
					p.calls = append(p.calls, c)
					versions[rec.Metadata.Version] = true
					sources[cp.Source]++
				}
			}
			if err == io.EOF {
				if cutLine(line) {
					r.cut = append(r.cut, fmt.Sprintf("%s: the file ends inside line %d (no newline after it)", in.path, lineNo))
				}
				break
			}
			if err != nil {
				r.cut = append(r.cut, fmt.Sprintf("%s: %s at line %d", in.path, readErr(err), lineNo))
				r.missingf("the rest of %s: %s at line %d; the lines before are imported", in.path, readErr(err), lineNo)
				break
			}
		}
		if good == 0 && damaged > 0 && lineNo > 0 {
			return notFormat(in.path, 1, 0, "not NCCL Inspector output: no line is a whole coll_perf record")
		}
		if ctx.Err() != nil {
			break
		}
	}
	if records == 0 {
		return notFormat(ins[0].path, 1, 0, "NCCL Inspector output without any collective record")
	}
	// A process's rank is its rank on its largest communicator.
	world := 0
	used := map[int]string{}
	for _, p := range order {
		best := 0
		for _, rn := range p.comms {
			if rn[1] > best {
				best, p.rank = rn[1], rn[0]
			}
		}
		world = max(world, best)
		if prev, dup := used[p.rank]; dup {
			return fmt.Errorf("processes %s and %s are both rank %d of their largest communicator: import one job's files at a time", prev, p.key, p.rank)
		}
		used[p.rank] = p.key
	}
	var epoch int64 = -1
	estimated := int64(0)
	for _, p := range order {
		for _, c := range p.calls {
			if epoch < 0 || c.start < epoch {
				epoch = c.start
			}
			if c.estimate {
				estimated++
			}
		}
	}
	r.start = time.UnixMicro(epoch).UTC()
	byOp := map[string]int64{}
	var gaps int64
	for _, p := range order {
		info := trace.RankInfo{Rank: p.rank, WorldSize: world, Host: p.host, PID: p.pid}
		sp, err := s.stream(p.order, info)
		if err != nil {
			return err
		}
		r.ranks[p.order] = info
		sort.SliceStable(p.calls, func(i, j int) bool {
			return p.calls[i].comm < p.calls[j].comm || p.calls[i].comm == p.calls[j].comm && p.calls[i].sn < p.calls[j].sn
		})
		for i, c := range p.calls {
			if i > 0 && p.calls[i-1].comm == c.comm {
				gaps += c.sn - p.calls[i-1].sn - 1
			}
			e := event(trace.KindCollective, p.rank, c.op)
			e.Start, e.Dur, e.Bytes, e.Seq = (c.start-epoch)*1000, c.dur*1000, c.bytes, c.sn
			e.Comm = "comm/" + c.comm
			if c.nranks == world {
				e.Comm = "world"
			}
			if c.op == "send" || c.op == "recv" {
				e.Kind = map[string]trace.Kind{"send": trace.KindSend, "recv": trace.KindRecv}[c.op]
				e.Name, e.Seq = "sendrecv", -1
			} else {
				e.Algo = trace.AlgoUnknown
			}
			byOp[e.Name]++
			if err := sp.add(e); err != nil {
				return err
			}
		}
	}
	r.world = world
	r.config["ranks"] = strconv.Itoa(world)
	var vs []string
	for v := range versions {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	r.tool = "NCCL Inspector " + strings.Join(vs, ", ")
	r.config["timing_source"] = strings.Join(sortedKeys(sources), ",")
	r.skip("lines that are not a whole JSON object (cut or damaged)", damaged)
	r.skip("records without coll_perf", notColl)
	r.skip("records dumped twice (same communicator and coll_sn)", dups)
	if estimated > 0 {
		r.missingf("start times of %d collectives: the output is not verbose, so each starts at its dump time minus its execution time, late by up to the dump interval (NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS); arrival skew and waits are only as good as that (NCCL_INSPECTOR_DUMP_VERBOSE=1 records the kernels' own times)", estimated)
	}
	if gaps > 0 {
		r.missingf("%d collectives whose coll_sn is skipped in the output: the plugin dumped no record for them", gaps)
	}
	var shapes []string
	for _, o := range sortedKeys(byOp) {
		if o != "sendrecv" {
			shapes = append(shapes, standardShape(o))
		}
	}
	r.missingf("algorithm: not in Inspector's output, so every collective's algo is %q; the alpha-beta model (predict, the report's model) assumes %s", trace.AlgoUnknown, strings.Join(shapes, ", "))
	r.missingf("dtype and the messages inside each collective: not in Inspector's output")
	r.missingf("compute and steps: not in Inspector's output")
	var ops []string
	for _, o := range sortedKeys(byOp) {
		ops = append(ops, fmt.Sprintf("%d %s", byOp[o], o))
	}
	r.summaryf("%d records from %d processes (%s)", records, len(order), strings.Join(ops, ", "))
	return nil
}

// cutLine says whether the last line of a text input, read with its
// newline, lacks it: the tools write whole lines, so the file was cut
// inside it.
func cutLine(line []byte) bool {
	return len(bytes.TrimSpace(line)) > 0 && line[len(line)-1] != '\n'
}

// readLine reads one line of at most limit bytes (a longer one is cut to
// limit and the rest skipped). It returns io.EOF with the last line.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk[:min(len(chunk), max(0, limit-len(line)))]...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return line, err
	}
}
