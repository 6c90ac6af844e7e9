package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/commprof/commprof/trace"
)

// traceFile is the JSON object form of the Trace Event Format.
type traceFile struct {
	TraceEvents     []map[string]any `json:"traceEvents"`
	DisplayTimeUnit string           `json:"displayTimeUnit"`
	Metadata        map[string]any   `json:"metadata"`
}

// parsePerfetto decodes a Perfetto export, keeping numbers exact.
func parsePerfetto(t *testing.T, b []byte) traceFile {
	t.Helper()
	if !json.Valid(b) {
		t.Fatalf("not valid JSON:\n%.2000s", b)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var tf traceFile
	if err := d.Decode(&tf); err != nil {
		t.Fatal(err)
	}
	return tf
}

// microsToNS reads a JSON number of microseconds back as nanoseconds,
// failing if it is not exact to the nanosecond.
func microsToNS(v any) (int64, error) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("%v (%T) is not a number", v, v)
	}
	s := string(n)
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 3 || strings.ContainsAny(s, "eE") {
		return 0, fmt.Errorf("%s µs is not a whole number of ns", s)
	}
	frac += strings.Repeat("0", 3-len(frac))
	neg := strings.HasPrefix(whole, "-")
	w, err := strconv.ParseInt(strings.TrimPrefix(whole, "-"), 10, 64)
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseInt(frac, 10, 64)
	if err != nil {
		return 0, err
	}
	ns := w*1000 + f
	if neg {
		ns = -ns
	}
	return ns, nil
}

func integer(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

// checkSchema checks every event against the Trace Event Format: the
// fields each phase requires and their types.
func checkSchema(t *testing.T, tf traceFile) {
	t.Helper()
	if tf.DisplayTimeUnit != "ns" {
		t.Errorf("displayTimeUnit %q", tf.DisplayTimeUnit)
	}
	if tf.Metadata == nil {
		t.Error("no metadata object")
	}
	for i, e := range tf.TraceEvents {
		bad := func(format string, a ...any) {
			t.Errorf("event %d %v: %s", i, e, fmt.Sprintf(format, a...))
		}
		ph, _ := e["ph"].(string)
		if _, ok := e["name"].(string); !ok {
			bad("no name")
		}
		for _, k := range []string{"pid", "tid"} {
			if v, ok := integer(e[k]); !ok || v <= 0 {
				bad("%s is not a positive integer", k)
			}
		}
		if _, err := microsToNS(e["ts"]); err != nil {
			bad("ts: %v", err)
		}
		if a, ok := e["args"]; ok {
			if _, ok := a.(map[string]any); !ok {
				bad("args is not an object")
			}
		}
		switch ph {
		case "X":
			d, err := microsToNS(e["dur"])
			if err != nil || d < 0 {
				bad("dur %v: %v", e["dur"], err)
			}
			if _, ok := e["cat"].(string); !ok {
				bad("no cat")
			}
		case "i":
			if s := e["s"]; s != "t" && s != "p" && s != "g" {
				bad("instant scope %v", s)
			}
		case "s", "f":
			if _, ok := integer(e["id"]); !ok {
				bad("flow without an integer id")
			}
			if _, ok := e["cat"].(string); !ok {
				bad("flow without cat")
			}
			if ph == "f" && e["bp"] != "e" {
				bad("flow end not bound to its enclosing slice")
			}
		case "M":
			args, _ := e["args"].(map[string]any)
			switch e["name"] {
			case "process_name", "thread_name":
				if _, ok := args["name"].(string); !ok {
					bad("no args.name")
				}
			case "process_sort_index", "thread_sort_index":
				if _, ok := integer(args["sort_index"]); !ok {
					bad("no args.sort_index")
				}
			default:
				bad("unknown metadata event")
			}
		default:
			bad("phase %q", ph)
		}
	}
}

type slice struct {
	pid, tid  int64
	cat, name string
	ts, dur   int64
	args      map[string]any
}

func (s slice) contains(ts int64) bool { return s.ts <= ts && ts <= s.ts+s.dur }

func slicesOf(t *testing.T, tf traceFile) []slice {
	var out []slice
	for _, e := range tf.TraceEvents {
		if e["ph"] != "X" {
			continue
		}
		pid, _ := integer(e["pid"])
		tid, _ := integer(e["tid"])
		ts, _ := microsToNS(e["ts"])
		dur, _ := microsToNS(e["dur"])
		args, _ := e["args"].(map[string]any)
		out = append(out, slice{pid, tid, e["cat"].(string), e["name"].(string), ts, dur, args})
	}
	return out
}

func TestExportPerfetto(t *testing.T) {
	run := testRun()
	var buf bytes.Buffer
	if err := Perfetto(&buf, run); err != nil {
		t.Fatal(err)
	}
	out := buf.Bytes()
	tf := parsePerfetto(t, out)
	checkSchema(t, tf)

	// Safe in a page too: nothing that ends a script, no raw control or
	// line-separator characters, valid UTF-8.
	if bytes.Contains(bytes.ToLower(out), []byte("</script")) || bytes.Contains(out, []byte("<!--")) {
		t.Error("output holds </script or <!--")
	}
	if bytes.ContainsFunc(out, func(r rune) bool { return (r < 0x20 && r != '\n') || r == '\u2028' || r == '\u2029' }) || !utf8.Valid(out) {
		t.Error("output holds raw control characters or is not UTF-8")
	}

	// One process per rank, pid rank+1, named with its host; a name for
	// every thread that has events.
	procs := map[int64]string{}
	threads := map[[2]int64]string{}
	for _, e := range tf.TraceEvents {
		if e["ph"] != "M" {
			continue
		}
		pid, _ := integer(e["pid"])
		tid, _ := integer(e["tid"])
		name, _ := e["args"].(map[string]any)["name"].(string)
		switch e["name"] {
		case "process_name":
			procs[pid] = name
		case "thread_name":
			threads[[2]int64{pid, tid}] = name
		}
	}
	if want := map[int64]string{1: "rank 0 (node-a)", 2: `rank 1 (node"b)`}; !maps.Equal(procs, want) {
		t.Errorf("processes %q, want %q", procs, want)
	}

	// Every span is a complete event with its exact time, on its rank's
	// thread for its kind, with its fields in args.
	got := slicesOf(t, tf)
	type span struct {
		pid       int64
		cat, name string
		ts, dur   int64
		bytes     string
	}
	var want, have []span
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			if e.Kind == trace.KindMark {
				continue
			}
			name := e.Name
			switch e.Kind {
			case trace.KindSend:
				name += " to " + strconv.Itoa(int(e.Peer))
			case trace.KindRecv:
				name += " from " + strconv.Itoa(int(e.Peer))
			case trace.KindStep:
				name += " 0"
			}
			b := ""
			if e.Bytes != 0 || e.Kind == trace.KindCollective || e.Kind == trace.KindSend || e.Kind == trace.KindRecv {
				b = strconv.FormatInt(e.Bytes, 10)
			}
			want = append(want, span{int64(rk.Info.Rank) + 1, e.Kind.String(), strings.ToValidUTF8(name, "\uFFFD"), e.Start, e.Dur, b})
		}
	}
	for _, s := range got {
		b := ""
		if n, ok := s.args["bytes"].(json.Number); ok {
			b = n.String()
		}
		have = append(have, span{s.pid, s.cat, s.name, s.ts, s.dur, b})
		if th := threads[[2]int64{s.pid, s.tid}]; !strings.HasPrefix(th, trackNames[trackOf(kindOf(t, s.cat))]) {
			t.Errorf("%s %q is on thread %q", s.cat, s.name, th)
		}
	}
	cmpSpan := func(a, b span) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) }
	slices.SortFunc(want, cmpSpan)
	slices.SortFunc(have, cmpSpan)
	if !slices.Equal(want, have) {
		t.Errorf("spans:\n got %v\nwant %v", have, want)
	}
	if !slices.ContainsFunc(got, func(s slice) bool { return s.name == strings.ToValidUTF8(nasty, "\uFFFD") }) {
		t.Error("the nasty name did not survive")
	}
	for _, s := range got {
		if s.cat == "recv" && s.ts == 41_000 && s.pid == 1 {
			if s.args["wait_ns"] != json.Number("1000") || s.args["peer"] != json.Number("1") || s.args["seq"] != json.Number("0") ||
				s.args["chunk"] != json.Number("0") || s.args["algo"] != "ring" || s.args["dtype"] != "float32" || s.args["comm"] != "world" {
				t.Errorf("recv args %v", s.args)
			}
		}
	}

	// Slices on one thread never overlap; the two overlapping sends of
	// rank 0 are on two threads, "sends" and "sends (2)".
	byThread := map[[2]int64][]slice{}
	for _, s := range got {
		byThread[[2]int64{s.pid, s.tid}] = append(byThread[[2]int64{s.pid, s.tid}], s)
	}
	for th, ss := range byThread {
		slices.SortFunc(ss, func(a, b slice) int { return int(a.ts - b.ts) })
		for i := 1; i < len(ss); i++ {
			if ss[i].ts < ss[i-1].ts+ss[i-1].dur {
				t.Errorf("thread %v (%s): %q overlaps %q", th, threads[th], ss[i].name, ss[i-1].name)
			}
		}
	}
	var sendThreads []string
	for th, name := range threads {
		if th[0] == 1 && strings.HasPrefix(name, "sends") {
			sendThreads = append(sendThreads, name)
		}
	}
	slices.Sort(sendThreads)
	if !slices.Equal(sendThreads, []string{"sends", "sends (2)"}) {
		t.Errorf("rank 0's send threads: %q", sendThreads)
	}

	// The mark is an instant with its value.
	var marks int
	for _, e := range tf.TraceEvents {
		if e["ph"] == "i" {
			marks++
			ts, _ := microsToNS(e["ts"])
			if e["name"] != "test_accuracy" || ts != 99_000 || e["args"].(map[string]any)["value"] != json.Number("0.875") {
				t.Errorf("mark %v", e)
			}
		}
	}
	if marks != 1 {
		t.Errorf("%d instant events, want 1", marks)
	}

	// Flows: each id has one start, on the send's slice, and one end, on
	// the receive's slice of the same message.
	type flow struct{ s, f []map[string]any }
	flows := map[int64]*flow{}
	for _, e := range tf.TraceEvents {
		ph := e["ph"]
		if ph != "s" && ph != "f" {
			continue
		}
		if e["cat"] != "message" {
			t.Errorf("flow category %v", e["cat"])
		}
		id, _ := integer(e["id"])
		if flows[id] == nil {
			flows[id] = &flow{}
		}
		if ph == "s" {
			flows[id].s = append(flows[id].s, e)
		} else {
			flows[id].f = append(flows[id].f, e)
		}
	}
	if len(flows) != matched {
		t.Errorf("%d flows, want %d", len(flows), matched)
	}
	enclosing := func(e map[string]any, cat string) *slice {
		pid, _ := integer(e["pid"])
		tid, _ := integer(e["tid"])
		ts, _ := microsToNS(e["ts"])
		var found *slice
		for i := range got {
			if s := &got[i]; s.pid == pid && s.tid == tid && s.cat == cat && s.contains(ts) {
				if found != nil {
					t.Errorf("flow %v is inside two slices", e)
				}
				found = s
			}
		}
		return found
	}
	for id, fl := range flows {
		if len(fl.s) != 1 || len(fl.f) != 1 {
			t.Errorf("flow %d: %d starts, %d ends", id, len(fl.s), len(fl.f))
			continue
		}
		s, r := enclosing(fl.s[0], "send"), enclosing(fl.f[0], "recv")
		if s == nil || r == nil {
			t.Errorf("flow %d: send slice %v, recv slice %v", id, s, r)
			continue
		}
		if s.args["peer"] != json.Number(strconv.FormatInt(r.pid-1, 10)) || r.args["peer"] != json.Number(strconv.FormatInt(s.pid-1, 10)) ||
			s.args["seq"] != r.args["seq"] || s.args["chunk"] != r.args["chunk"] || fl.s[0]["name"] != fl.f[0]["name"] {
			t.Errorf("flow %d joins %v and %v", id, s, r)
		}
	}

	md := tf.Metadata
	if md["run_id"] != "test-1" || md["name"] != "test </script>" || md["messages"] != json.Number(strconv.Itoa(matched)) ||
		md["events"] != json.Number(strconv.Itoa(run.NumEvents())) {
		t.Errorf("metadata %v", md)
	}
	if p, _ := md["problems"].([]any); len(p) != 1 {
		t.Errorf("metadata problems %v", md["problems"])
	}
}

func kindOf(t *testing.T, cat string) trace.Kind {
	k, err := trace.ParseKind(cat)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestExportPerfettoEmptyRun(t *testing.T) {
	run := &trace.Run{Dir: "empty", Ranks: []trace.Rank{{Info: trace.RankInfo{Rank: 0}}}}
	var buf bytes.Buffer
	if err := Perfetto(&buf, run); err != nil {
		t.Fatal(err)
	}
	tf := parsePerfetto(t, buf.Bytes())
	checkSchema(t, tf)
	if len(tf.TraceEvents) != 2 || tf.TraceEvents[0]["args"].(map[string]any)["name"] != "rank 0" {
		t.Errorf("events %v", tf.TraceEvents)
	}
}

// failWriter fails after n bytes.
type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if len(p) > w.n {
		n := w.n
		w.n = 0
		return n, fmt.Errorf("disk full")
	}
	w.n -= len(p)
	return len(p), nil
}

func TestExportWriteErrors(t *testing.T) {
	run := testRun()
	for name, write := range map[string]func(*failWriter) error{
		"perfetto": func(w *failWriter) error { return Perfetto(w, run) },
		"pprof":    func(w *failWriter) error { return PProf(w, run) },
		"csv":      func(w *failWriter) error { return CSV(w, run) },
	} {
		if err := write(&failWriter{n: 100}); err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestExportAppendMicros(t *testing.T) {
	for _, tc := range []struct {
		ns   int64
		want string
	}{
		{0, "0"}, {1, "0.001"}, {10, "0.01"}, {999, "0.999"}, {1000, "1"}, {1500, "1.5"}, {1234567, "1234.567"},
		{-1500, "-1.5"}, {-1, "-0.001"}, {math.MaxInt64, "9223372036854775.807"}, {math.MinInt64, "-9223372036854775.808"},
	} {
		if got := string(appendMicros(nil, tc.ns)); got != tc.want {
			t.Errorf("%d ns: %s, want %s", tc.ns, got, tc.want)
		}
	}
}

func TestExportAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "allreduce", nasty, "\x00\x1f", "日本語", "a\xffb\xc3", `\u0041`, "\u2028"} {
		b := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Errorf("%q -> %s: %v", s, b, err)
			continue
		}
		if want := strings.ToValidUTF8(s, "\uFFFD"); back != want {
			t.Errorf("%q -> %s -> %q", s, b, back)
		}
		if bytes.ContainsAny(b, "<>&\u2028\u2029") {
			t.Errorf("%q -> %s is not safe in a page", s, b)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	f.Add(nasty)
	f.Fuzz(func(t *testing.T, s string) {
		b := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%q -> %s: %v", s, b, err)
		}
		// encoding/json replaces each invalid byte by U+FFFD as we do.
		want, _ := json.Marshal(s)
		var w string
		_ = json.Unmarshal(want, &w)
		if back != w {
			t.Fatalf("%q -> %q, encoding/json %q", s, back, w)
		}
	})
}
