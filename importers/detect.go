package importers

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"unicode/utf8"
)

// sniffBytes is how much of an input's (decompressed) content detection
// looks at.
const sniffBytes = 256 << 10

// DetectFile returns the format of the file at path, from its content
// (after undoing gzip), never from its name.
func DetectFile(path string) (string, error) {
	in, err := openInput(context.Background(), path, nil)
	if err != nil {
		return "", err
	}
	defer in.Close()
	head := in.peek(sniffBytes)
	f, why := Detect(head)
	if f == "" {
		return "", notFormat(path, 1, 0, "%s", why)
	}
	return f, nil
}

var (
	ncclLineRE   = regexp.MustCompile(`(?m)^(?:\[[^\]\n]*\] )?[^\s:]+:\d+:\d+ (?:\[\d+\] )?(?:[0-9.]+ \S+ )?NCCL (?:INFO|WARN|TRACE|CALL|ABORT) `)
	testsHeadRE  = regexp.MustCompile(`(?m)^#\s+(?:nThread \d+ nGpus|Collective test starting:|nccl-tests version|Rank\s+\d+ Group\s+\d+ Pid)`)
	testsTableRE = regexp.MustCompile(`(?m)^#\s+size\s+count\s+type\s+`)
	torchArrayRE = regexp.MustCompile(`"name":\s*"(?:aten::|c10d::|record_param_comms|ProfilerStep#|(?:nccl|gloo|mpi):[a-z_]+")`)
	horovodRE    = regexp.MustCompile(`"(?:NEGOTIATE_[A-Z]+|CYCLE_START|MEMCPY_IN_FUSION_BUFFER|MPI_ALLREDUCE|NCCL_ALLREDUCE|ALLREDUCE|BROADCAST|ALLGATHER)"|"start_time_since_epoch_in_micros"`)
)

// Detect tells an input's format from its first bytes. When it cannot, it
// returns "" and why.
func Detect(head []byte) (format, why string) {
	b := bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return "", "the file is empty"
	}
	switch b[0] {
	case '[':
		if horovodRE.Match(b) {
			return Horovod, ""
		}
		if ncclLineRE.Match(b) { // NCCL_DEBUG_TIMESTAMP_FORMAT's "[time] host:pid:tid ..."
			return NCCLLog, ""
		}
		if torchArrayRE.Match(b) { // export_chrome_trace without Kineto
			return Kineto, ""
		}
		return "", "a JSON array, but neither a Horovod timeline (no NEGOTIATE_*, ALLREDUCE or start_time_since_epoch_in_micros events in its first 256 KB) nor PyTorch's profiler export (no aten::, c10d::, nccl: or gloo: events)"
	case '{':
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line = b[:i]
		}
		var probe struct {
			Header   json.RawMessage `json:"header"`
			CollPerf json.RawMessage `json:"coll_perf"`
		}
		if json.Unmarshal(line, &probe) == nil && probe.CollPerf != nil {
			return NCCLInspector, ""
		}
		for _, k := range []string{`"traceEvents"`, `"schemaVersion"`, `"distributedInfo"`, `"deviceProperties"`} {
			if bytes.Contains(b, []byte(k)) {
				return Kineto, ""
			}
		}
		if bytes.Contains(line, []byte(`"coll_perf"`)) {
			return NCCLInspector, ""
		}
		return "", "a JSON object, but neither a PyTorch profiler trace (no traceEvents) nor NCCL Inspector output (no coll_perf)"
	}
	if testsTableRE.Match(b) || testsHeadRE.Match(b) {
		return NCCLTests, ""
	}
	if ncclLineRE.Match(b) {
		return NCCLLog, ""
	}
	return "", "not a trace commprof imports: it does not start like a Horovod timeline, a PyTorch profiler trace, NCCL Inspector output, nccl-tests output or an NCCL debug log (it starts with " + quoteHead(b) + ")"
}

// quoteHead quotes an input's first few characters for an error.
func quoteHead(b []byte) string {
	if len(b) > 40 {
		b = b[:40]
	}
	for !utf8.Valid(b) && len(b) > 0 {
		b = b[:len(b)-1]
	}
	s := strings.TrimRight(string(b), "\r\n")
	return strings.ReplaceAll(strings.ReplaceAll(`"`+s+`"`, "\n", `\n`), "\t", `\t`)
}
