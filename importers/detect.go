package importers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/commprof/commprof/internal/units"
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
	f, why := in.detect()
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

// detect tells the input's format from its content. A text that is none
// of the formats in its first sniffBytes may be a log or a benchmark's
// output whose records start late: it is read on, up to maxSearch bytes,
// and what was read is kept for the importer.
func (in *input) detect() (format, why string) {
	head := in.peek(sniffBytes)
	format, why = Detect(head)
	if format != "" || len(head) < sniffBytes || !isText(head) {
		return format, why
	}
	b := bytes.TrimLeft(bytes.TrimPrefix(head, []byte("\xef\xbb\xbf")), " \t\r\n")
	if len(b) > 0 && (b[0] == '[' || b[0] == '{') {
		return format, why
	}
	var kept []io.Reader
	var read int64
	var err error
	var partial []byte // the last chunk's unfinished line
	for err == nil && read < maxSearch {
		chunk := make([]byte, 1<<20)
		var n int
		n, err = io.ReadFull(in.r, chunk)
		chunk = chunk[:n]
		kept = append(kept, bytes.NewReader(chunk))
		read += int64(n)
		lines := chunk
		if err == nil {
			lines = chunk[:bytes.LastIndexByte(chunk, '\n')+1]
		}
		lines = append(partial, lines...)
		partial = append([]byte(nil), chunk[len(lines)-len(partial):]...)
		if !isText(lines) {
			break
		}
		// The regexps only where their records may be: they are slow.
		switch {
		case bytes.Contains(lines, []byte("#")) && (testsTableRE.Match(lines) || testsHeadRE.Match(lines)):
			format = NCCLTests
		case bytes.Contains(lines, []byte("NCCL ")) && ncclLineRE.Match(lines):
			format = NCCLLog
		default:
			continue
		}
		break
	}
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		kept = append(kept, errReader{err})
	} else {
		kept = append(kept, in.r)
	}
	in.r = bufio.NewReaderSize(io.MultiReader(kept...), 1<<20)
	if format != "" {
		return format, ""
	}
	return "", why + fmt.Sprintf("; nor does any line of its first %s hold one of their records", units.Bytes(read))
}

// errReader returns err: the read error that ended detection, for the
// importer to meet where it happened.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// isText says whether b looks like text: no NUL byte, valid UTF-8 (but
// for a character cut at its end).
func isText(b []byte) bool {
	if bytes.IndexByte(b, 0) >= 0 {
		return false
	}
	for i := 0; i < 4 && len(b) > 0 && !utf8.Valid(b); i++ {
		b = b[:len(b)-1]
	}
	return utf8.Valid(b)
}

// quoteHead quotes an input's first few characters for an error.
func quoteHead(b []byte) string {
	if !isText(b[:min(len(b), 4096)]) {
		n := min(len(b), 8)
		return fmt.Sprintf("binary data, not text: its first bytes are % x", b[:n])
	}
	if len(b) > 40 {
		b = b[:40]
	}
	for !utf8.Valid(b) && len(b) > 0 {
		b = b[:len(b)-1]
	}
	s := strings.TrimRight(string(b), "\r\n")
	return strings.ReplaceAll(strings.ReplaceAll(`"`+s+`"`, "\n", `\n`), "\t", `\t`)
}
