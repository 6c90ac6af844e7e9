package importers

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/commprof/commprof/trace"
)

// The corpus: every real trace of ../shared/data (read in place, never
// copied here), whole and damaged by the test itself: cut at many points
// (inside records too), concatenated with itself, followed by NULs, its
// gzip stream cut or corrupted. Each import is held to the source's own
// counts, computed here from the file's text or JSON independently of the
// importers; to the status docs/import.md gives; and to finishing in
// bounded time and memory.

// truth is what a source holds by its own count: the collectives (one
// per rank and call) and their bytes (-1: the source does not say).
type truth struct {
	colls int64
	bytes int64
}

type corpusSource struct {
	rel    string // under ../shared/data
	format string
	text   bool // a line format: a cut at a line's end may look whole
	// count counts the truth of the (decompressed) content; a cut prefix
	// is counted the same way, as far as it holds whole records.
	count func(t *testing.T, content []byte) truth
	op    string // nccl-tests: the collective, which a cut table may not tell
	// dir: the source is a directory of files, damaged one file at a time
	// (its last, in name order).
	dir bool
}

var corpusSources = []corpusSource{
	{rel: "horovod/atpesc_tf2_keras_cpu_8ranks.json", format: Horovod, count: countHorovod},
	{rel: "kineto/hta_nccl_data_rank0_of2.json.gz", format: Kineto, count: countKinetoKernels},
	{rel: "kineto/param_dlrm_8ranks", format: Kineto, count: countKinetoKernels, dir: true},
	{rel: "nccl_logs/sugarlxn_allreduce_2rank_trace.log", format: NCCLLog, text: true, count: countNCCLLog},
	{rel: "nccl_inspector/sugarlxn_allreduce_2rank", format: NCCLInspector, text: true, count: countInspector, dir: true},
	{rel: "nccl_tests/alcf_polaris_nccl218_n8g4_32ranks_all_reduce.dat", format: NCCLTests, op: "allreduce", text: true, count: countNCCLTests},
}

var corpusDTypeSize = map[string]int64{"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int32": 4, "int64": 8, "int8": 1, "uint8": 1,
	"Float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Int": 4, "Long": 8, "Byte": 1, "Char": 1, "Bool": 1}

// countHorovod: the operation spans (ALLREDUCE, BROADCAST, ... begun with
// "B") are rank 0's collectives, and each tick of another rank in the
// tensor's negotiation before it (an "X" event named by the rank) that
// rank's; the operation's end's shape and dtype give their bytes.
func countHorovod(t *testing.T, content []byte) truth {
	var evs []map[string]any
	dec := json.NewDecoder(bytes.NewReader(content))
	if _, err := dec.Token(); err != nil {
		return truth{}
	}
	var tr truth
	for dec.More() {
		var e map[string]any
		if dec.Decode(&e) != nil {
			break
		}
		evs = append(evs, e)
	}
	ticks := map[any]int64{} // by tensor (pid): the other ranks' ticks of its negotiation
	for _, e := range evs {
		name, _ := e["name"].(string)
		pid := e["pid"]
		if e["ph"] == "B" && strings.HasPrefix(name, "NEGOTIATE_") {
			ticks[pid] = 0
		}
		if _, err := strconv.Atoi(name); err == nil && e["ph"] == "X" && name != "0" {
			ticks[pid]++
		}
		if e["ph"] == "B" && (name == "ALLREDUCE" || name == "BROADCAST" || name == "ALLGATHER" || name == "ALLTOALL" || name == "REDUCESCATTER") {
			tr.colls += 1 + ticks[pid]
		}
		if args, ok := e["args"].(map[string]any); ok && e["ph"] == "E" {
			shape, _ := args["shape"].(string)
			dt, _ := args["dtype"].(string)
			if shape == "" || corpusDTypeSize[dt] == 0 {
				continue
			}
			n := int64(1) // a scalar's shape is []
			for _, d := range strings.Split(strings.Trim(shape, "[]"), ",") {
				if v, err := strconv.ParseInt(strings.TrimSpace(d), 10, 64); err == nil {
					n *= v
				}
			}
			tr.bytes += n * corpusDTypeSize[dt] * (1 + ticks[pid])
			ticks[pid] = 0
		}
	}
	return tr
}

// countKinetoKernels: each NCCL kernel is one collective; its bytes the
// larger of its input and output where its args say them.
func countKinetoKernels(t *testing.T, content []byte) truth {
	var doc struct {
		TraceEvents []struct {
			Name string         `json:"name"`
			Ph   string         `json:"ph"`
			Args map[string]any `json:"args"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(content, &doc); err != nil {
		t.Fatalf("the source is not JSON: %v", err)
	}
	tr := truth{bytes: 0}
	for _, e := range doc.TraceEvents {
		if e.Ph != "X" || !strings.HasPrefix(e.Name, "ncclKernel_") && !strings.HasPrefix(e.Name, "ncclDevKernel_") {
			continue
		}
		tr.colls++
		in, _ := e.Args["In msg nelems"].(float64)
		out, _ := e.Args["Out msg nelems"].(float64)
		dt, _ := e.Args["dtype"].(string)
		if tr.bytes >= 0 && (in > 0 || out > 0) && corpusDTypeSize[dt] > 0 {
			tr.bytes += int64(max(in, out)) * corpusDTypeSize[dt]
		} else {
			tr.bytes = -1 // sizes only through the CPU op's Input Dims
		}
	}
	return tr
}

var (
	nlPrefixCount = regexp.MustCompile(`[A-Za-z0-9._-]+:\d+:\d+ (?:\[\d+\] NCCL (?:INFO|WARN|TRACE) |NCCL CALL )`)
	nlCallCount   = regexp.MustCompile(`^([A-Za-z0-9._-]+:\d+:\d+) \[\d+\] NCCL INFO \w+: opCount [0-9a-f]+ sendbuff \S+ recvbuff \S+ count (\d+) datatype (\d+) op \d+ root -?\d+ comm 0x[0-9a-f]+ \[nranks=\d+\] stream \S+\s*$`)
)

// countNCCLLog: a per-call line whole at the end of its physical line
// (after the last record prefix on it), once per distinct text; bytes =
// count × the datatype's size (NCCL's ncclDataType_t numbering).
func countNCCLLog(t *testing.T, content []byte) truth {
	sizes := []int64{1, 1, 4, 4, 8, 8, 2, 4, 8, 2}
	var tr truth
	seen := map[string]bool{}
	for _, line := range strings.Split(string(content), "\n") {
		locs := nlPrefixCount.FindAllStringIndex(line, -1)
		if len(locs) == 0 {
			continue
		}
		rec := line[locs[len(locs)-1][0]:]
		m := nlCallCount.FindStringSubmatch(strings.TrimRight(rec, "\r"))
		if m == nil || seen[rec] {
			continue
		}
		seen[rec] = true
		tr.colls++
		n, _ := strconv.ParseInt(m[2], 10, 64)
		dt, _ := strconv.Atoi(m[3])
		if dt < len(sizes) {
			tr.bytes += n * sizes[dt]
		}
	}
	return tr
}

// countInspector: each line that is a whole JSON object with coll_perf is
// one collective of coll_msg_size_bytes.
func countInspector(t *testing.T, content []byte) truth {
	var tr truth
	for _, line := range bytes.Split(content, []byte("\n")) {
		var rec struct {
			CollPerf *struct {
				Coll  string `json:"coll"`
				Bytes int64  `json:"coll_msg_size_bytes"`
			} `json:"coll_perf"`
			Header struct {
				NRanks int64 `json:"n_ranks"`
			} `json:"header"`
		}
		if json.Unmarshal(line, &rec) != nil || rec.CollPerf == nil {
			continue
		}
		tr.colls++
		b := rec.CollPerf.Bytes
		if c := strings.ToLower(rec.CollPerf.Coll); strings.Contains(c, "allgather") || strings.Contains(c, "reducescatter") {
			b *= rec.Header.NRanks
		}
		tr.bytes += b
	}
	return tr
}

// countNCCLTests: every whole row is iters calls on every rank listed,
// each of the row's size.
func countNCCLTests(t *testing.T, content []byte) truth {
	iters := int64(1)
	if m := regexp.MustCompile(`warmup iters: \d+ iters: (\d+) `).FindSubmatch(content); m != nil {
		iters, _ = strconv.ParseInt(string(m[1]), 10, 64)
	}
	ranks := int64(len(regexp.MustCompile(`(?m)^#\s+Rank\s+\d+ Group`).FindAll(content, -1)))
	if !regexp.MustCompile(`(?m)^#\s+size\s+count\s+type`).Match(content) {
		return truth{}
	}
	var tr truth
	for _, line := range strings.Split(string(content), "\n") {
		f := strings.Fields(line)
		if len(f) != 13 || strings.HasPrefix(line, "#") {
			continue
		}
		size, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || len(f[12]) == 0 {
			continue
		}
		tr.colls += iters * ranks
		tr.bytes += size * iters * ranks
	}
	return tr
}

// corpusImport imports paths, failing t if the import does not end
// within a minute or holds more than 512 MiB of heap at any time.
func corpusImport(t *testing.T, src corpusSource, format string, paths ...string) (*Result, *trace.Run, error) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run")
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	type done struct {
		res *Result
		err error
	}
	ch := make(chan done, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		res, err := Import(ctx, paths, Options{Format: format, Out: out, Op: src.op})
		ch <- done{res, err}
	}()
	var d done
	select {
	case d = <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("importing %v did not end within a minute", paths)
	}
	close(stop)
	<-sampled
	if p := peak.Load(); p > 512<<20 {
		t.Errorf("importing %v held %d MiB of heap", paths, p>>20)
	}
	if d.err != nil {
		return nil, nil, d.err
	}
	run, err := trace.ReadRun(out)
	if err != nil {
		t.Fatalf("reading the run imported from %v: %v", paths, err)
	}
	return d.res, run, nil
}

// got counts the run's collectives and their bytes.
func got(run *trace.Run) truth {
	var g truth
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			if e.Kind == trace.KindCollective {
				g.colls++
				g.bytes += e.Bytes
			}
		}
	}
	return g
}

func readContent(t *testing.T, path string) (content, raw []byte) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if content, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
		return content, raw
	}
	return raw, raw
}

func TestImportCorpus(t *testing.T) {
	for _, src := range corpusSources {
		t.Run(filepath.Base(src.rel), func(t *testing.T) {
			path := realData(t, src.rel)
			// The inputs: a directory's files, the last one damaged.
			files := []string{path}
			if src.dir {
				ents, err := os.ReadDir(path)
				if err != nil {
					t.Fatal(err)
				}
				files = files[:0]
				for _, e := range ents {
					files = append(files, filepath.Join(path, e.Name()))
				}
			}
			last := files[len(files)-1]
			others := files[:len(files)-1]
			var whole truth
			for _, f := range files {
				c, _ := readContent(t, f)
				tr := src.count(t, c)
				whole.colls += tr.colls
				if whole.bytes >= 0 && tr.bytes >= 0 {
					whole.bytes += tr.bytes
				} else {
					whole.bytes = -1
				}
			}
			content, _ := readContent(t, last)
			before := truth{}
			for _, f := range others {
				c, _ := readContent(t, f)
				tr := src.count(t, c)
				before.colls += tr.colls
				before.bytes += tr.bytes
			}
			if whole.colls == 0 {
				t.Fatalf("the source holds no collectives by its own count")
			}
			dir := t.TempDir()
			with := func(name string, data []byte) []string {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Fatal(err)
				}
				return append(append([]string(nil), others...), p)
			}
			check := func(t *testing.T, what string, want truth, g truth) {
				t.Helper()
				if g.colls != want.colls || want.bytes >= 0 && g.bytes != want.bytes {
					t.Errorf("%s: %d collectives of %d bytes; the source holds %d of %d", what, g.colls, g.bytes, want.colls, want.bytes)
				}
			}

			t.Run("whole", func(t *testing.T) {
				res, run, err := corpusImport(t, src, "", files...)
				if err != nil {
					t.Fatal(err)
				}
				if res.Format != src.format || res.Manifest.Status != trace.StatusComplete {
					t.Errorf("format %s, status %s (%s)", res.Format, res.Manifest.Status, res.Manifest.Error)
				}
				check(t, "whole", whole, got(run))
			})

			t.Run("cut", func(t *testing.T) {
				// Cuts at seven points spread over the content, each a
				// few bytes into a record or line.
				for i := 1; i <= 7; i++ {
					at := len(content) * i / 8
					at += 7 // inside whatever starts there
					if at >= len(content) {
						continue
					}
					prefix := content[:at]
					paths := with("cut-"+strconv.Itoa(i), prefix)
					res, run, err := corpusImport(t, src, src.format, paths...)
					if err != nil {
						// Refused: only when the prefix holds no record
						// (a table not yet begun).
						if tr := src.count(t, prefix); tr.colls > 0 && src.format != Horovod && src.format != Kineto {
							t.Errorf("cut at %d: refused although it holds %d collectives: %v", at, tr.colls, err)
						}
						continue
					}
					g := got(run)
					if g.colls > whole.colls {
						t.Errorf("cut at %d: %d collectives, more than the whole source's %d", at, g.colls, whole.colls)
					}
					if src.text {
						tr := src.count(t, prefix[:bytes.LastIndexByte(prefix, '\n')+1])
						tr.colls += before.colls
						tr.bytes += before.bytes
						check(t, "cut at "+strconv.Itoa(at), tr, g)
					}
					wholeLines := src.text && prefix[len(prefix)-1] == '\n' // a cut there looks whole
					if !wholeLines && (res.Manifest.Status != trace.StatusInterrupted || res.Manifest.Error == "") {
						t.Errorf("cut at %d inside a line or record: status %s, error %q", at, res.Manifest.Status, res.Manifest.Error)
					}
				}
			})

			t.Run("trailing-NULs", func(t *testing.T) {
				res, run, err := corpusImport(t, src, src.format, with("nuls", append(bytes.Clone(content), make([]byte, 1<<20)...))...)
				if err != nil {
					t.Fatal(err)
				}
				check(t, "followed by 1 MiB of NULs", whole, got(run))
				m := res.Manifest
				if m.Status == trace.StatusComplete && len(m.Source.Skipped) == 0 && !hasMissing(m, "NUL") {
					t.Errorf("the NULs are not said: status %s, skipped %v, missing %q", m.Status, m.Source.Skipped, m.Source.Missing)
				}
			})

			if !src.text {
				t.Run("concatenated", func(t *testing.T) {
					res, run, err := corpusImport(t, src, src.format, with("twice", append(bytes.Clone(content), content...))...)
					if err != nil {
						t.Fatal(err)
					}
					check(t, "twice in one file: the first", whole, got(run))
					if m := res.Manifest; len(m.Source.Skipped) == 0 || !hasMissing(m, "followed") && !hasMissing(m, "after") {
						t.Errorf("the second copy is not said: skipped %v, missing %q", m.Source.Skipped, m.Source.Missing)
					}
				})
			}

			t.Run("gzip-damaged", func(t *testing.T) {
				var zb bytes.Buffer
				zw := gzip.NewWriter(&zb)
				zw.Write(content)
				zw.Close()
				gz := zb.Bytes()
				// Cut in the middle of the gzip stream.
				res, run, err := corpusImport(t, src, src.format, with("cut.gz", gz[:len(gz)/2])...)
				if err == nil {
					if res.Manifest.Status != trace.StatusInterrupted {
						t.Errorf("a gzip stream cut in its middle: status %s", res.Manifest.Status)
					}
					if g := got(run); g.colls > whole.colls {
						t.Errorf("a cut gzip stream: %d collectives, more than the source's %d", g.colls, whole.colls)
					}
				}
				// One byte of its compressed data changed: an error, or a
				// run that says it is damaged; never more than the source.
				bad := bytes.Clone(gz)
				bad[len(bad)*2/3] ^= 0x55
				res, run, err = corpusImport(t, src, src.format, with("bad.gz", bad)...)
				if err == nil {
					if g := got(run); g.colls > whole.colls+int64(len(content)) {
						t.Errorf("a damaged gzip stream: %d collectives", g.colls)
					}
					if res.Manifest.Status != trace.StatusInterrupted && len(res.Manifest.Source.Skipped) == 0 {
						t.Errorf("a damaged gzip stream imported as %s with nothing skipped", res.Manifest.Status)
					}
				}
			})
		})
	}
}
