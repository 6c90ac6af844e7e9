package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/commprof/commprof/report"
)

// gate holds the builds of a server: each build, as it starts with its
// slot, says so on started and waits for release.
type gate struct {
	mu      sync.Mutex
	kinds   map[string]int
	started chan string
	release chan struct{}
}

func newGate(s *server) *gate {
	g := &gate{kinds: map[string]int{}, started: make(chan string, 100), release: make(chan struct{})}
	s.built = func(kind string) {
		g.mu.Lock()
		g.kinds[kind]++
		g.mu.Unlock()
		g.started <- kind
		<-g.release
	}
	return g
}

func (g *gate) count(kind string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.kinds[kind]
}

// Identical timeline.json requests at once share one build; the answer
// is then kept, so the next one builds nothing.
func TestServeTimelineSharesBuilds(t *testing.T) {
	runs, _ := fixture(t)
	s := newTestServer(t, Config{RunsDir: runs})
	get(t, s, "/runs/beta/stats.json") // the summary, before the gate
	g := newGate(s)
	const n = 12
	var wg sync.WaitGroup
	bodies := make([]string, n)
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := get(t, s, "/runs/beta/timeline.json?from=1000000&to=9000000")
			codes[i], bodies[i] = res.StatusCode, body(t, res)
		}()
	}
	if k := <-g.started; k != "timeline" {
		t.Fatalf("first build: %s", k)
	}
	// The others join the build under way instead of starting their own.
	run, err := s.lookup("beta")
	must(t, err)
	key := fmt.Sprintf("timeline\x00beta\x00%s\x00%d\x00%d", run.fp.key, 1000000, 9000000)
	for s.pages.waiters(key) < n-1 {
		runtime.Gosched()
	}
	close(g.release)
	wg.Wait()
	if c := g.count("timeline"); c != 1 {
		t.Fatalf("%d identical requests built the timeline %d times", n, c)
	}
	for i := range n {
		if codes[i] != 200 || bodies[i] != bodies[0] {
			t.Fatalf("request %d: %d, %d bytes (first %d)", i, codes[i], len(bodies[i]), len(bodies[0]))
		}
	}
	if res := get(t, s, "/runs/beta/timeline.json?from=1000000&to=9000000"); res.StatusCode != 200 || g.count("timeline") != 1 {
		t.Fatalf("a kept answer was built again: %d, %d builds", res.StatusCode, g.count("timeline"))
	}
	// A client that has it already gets 304 and nothing is built.
	res := get(t, s, "/runs/beta/timeline.json?from=1000000&to=9000000")
	etag := res.Header.Get("ETag")
	if res := get(t, s, "/runs/beta/timeline.json?from=1000000&to=9000000", "If-None-Match", etag); res.StatusCode != http.StatusNotModified || etag == "" {
		t.Fatalf("If-None-Match %s: %d", etag, res.StatusCode)
	}
}

// Beyond MaxBuilds builds at once a request waits in a queue of MaxQueue
// for at most BuildWait, then gets 503 with Retry-After; beyond the
// queue, 503 at once. The list of runs stays answerable and says what it
// could not read yet.
func TestServeBuildLimit(t *testing.T) {
	runs, _ := fixture(t)
	s := newTestServer(t, Config{RunsDir: runs, MaxBuilds: 1, MaxQueue: 1, BuildWait: 200 * time.Millisecond})
	get(t, s, "/runs/alpha/stats.json") // alpha's summary is kept; beta's is not read yet
	g := newGate(s)
	held := make(chan *http.Response, 1)
	go func() { held <- get(t, s, "/runs/alpha/") }()
	if k := <-g.started; k != "report" {
		t.Fatalf("first build: %s", k)
	}
	// One waits in the queue while another finds it full.
	queued := make(chan *http.Response, 1)
	start := time.Now()
	go func() { queued <- get(t, s, "/runs/beta/timeline.json?from=0&to=1000") }()
	for _, waiting := s.builds.inFlight(); waiting < 1; _, waiting = s.builds.inFlight() {
		runtime.Gosched()
	}
	full := get(t, s, "/diff?a=alpha&b=beta")
	if full.StatusCode != http.StatusServiceUnavailable || full.Header.Get("Retry-After") != "2" {
		t.Errorf("with the queue full: %d, Retry-After %q", full.StatusCode, full.Header.Get("Retry-After"))
	}
	if page := body(t, full); !strings.Contains(page, "busy") || !strings.Contains(page, "Try again") {
		t.Errorf("503 page:\n%s", page)
	}
	res := <-queued
	var msg struct{ Error string }
	if err := json.Unmarshal([]byte(body(t, res)), &msg); err != nil || res.StatusCode != http.StatusServiceUnavailable ||
		res.Header.Get("Retry-After") == "" || !strings.Contains(msg.Error, "busy") {
		t.Errorf("queued past BuildWait: %d %q %v", res.StatusCode, msg.Error, err)
	}
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Errorf("answered 503 after %v, before BuildWait", waited)
	}
	// The list answers, with the run it cannot read now marked.
	var list struct{ Runs []report.RunEntry }
	must(t, json.Unmarshal([]byte(body(t, get(t, s, "/api/runs"))), &list))
	pending := map[string]bool{}
	for _, r := range list.Runs {
		pending[r.Name] = r.Pending
	}
	if len(list.Runs) != 2 || pending["alpha"] || !pending["beta"] {
		t.Errorf("the list while busy: %+v", list.Runs)
	}
	if page := body(t, get(t, s, "/")); !strings.Contains(page, `data-run="beta"`) || !strings.Contains(page, "server is busy") {
		t.Errorf("the list page while busy:\n%s", page)
	}
	close(g.release)
	if res := <-held; res.StatusCode != 200 {
		t.Fatalf("the build that held the slot: %d", res.StatusCode)
	}
	// Free again: everything is answered, the busy answers were not kept.
	for _, p := range []string{"/runs/beta/timeline.json?from=0&to=1000", "/diff?a=alpha&b=beta"} {
		if res := get(t, s, p); res.StatusCode != 200 {
			t.Errorf("GET %s after: %d", p, res.StatusCode)
		}
	}
	var after struct{ Runs []report.RunEntry } // not list: json would keep its fields that are now omitted
	must(t, json.Unmarshal([]byte(body(t, get(t, s, "/api/runs"))), &after))
	for _, r := range after.Runs {
		if r.Pending || r.Events == 0 {
			t.Errorf("after: %s pending %v, %d events", r.Name, r.Pending, r.Events)
		}
	}
}

// The pages and timelines kept stay within CacheBytes whatever is asked.
func TestServeCacheStaysInBudget(t *testing.T) {
	runs, _ := fixture(t)
	const budget = 256 << 10
	s := newTestServer(t, Config{RunsDir: runs, CacheBytes: budget, CacheSize: 1000})
	for i := range 40 {
		for _, p := range []string{fmt.Sprintf("/runs/beta/timeline.json?from=%d&to=%d", i*100_000, i*100_000+3_000_000), "/runs/alpha/", "/diff?a=alpha&b=beta"} {
			if res := get(t, s, p); res.StatusCode != 200 {
				t.Fatalf("GET %s: %d", p, res.StatusCode)
			}
		}
		if n, b := s.pages.usage(); b > budget || n == 0 {
			t.Fatalf("after %d rounds: %d answers of %d bytes kept, budget %d", i+1, n, b, budget)
		}
	}
}

// Every number a query carries is checked, and a bad one is a 400 that
// names it.
func TestServeBadNumbers(t *testing.T) {
	runs, _ := fixture(t)
	s := newTestServer(t, Config{RunsDir: runs})
	for q, want := range map[string]string{
		"":                                "from is missing",
		"?from=10":                        "to is missing",
		"?from=a&to=b":                    "from=\"a\" is not a whole number",
		"?from=0&to=1e9":                  "to=\"1e9\" is not a whole number",
		"?from=20&to=10":                  "to=10 is not after from=20",
		"?from=-1&to=10":                  "from=-1 is negative",
		"?from=0&to=-10":                  "to=-10 is negative",
		"?from=0&to=9223372036854775808":  "to=9223372036854775808 is out of range",
		"?from=99999999999999999999&to=1": "from=99999999999999999999 is out of range",
		"?from=0&to=-9223372036854775809": "to=-9223372036854775809 is out of range",
	} {
		res := get(t, s, "/runs/beta/timeline.json"+q)
		var msg struct{ Error string }
		if err := json.Unmarshal([]byte(body(t, res)), &msg); err != nil || res.StatusCode != http.StatusBadRequest || !strings.Contains(msg.Error, want) {
			t.Errorf("timeline.json%s: %d %q, want 400 with %q", q, res.StatusCode, msg.Error, want)
		}
	}
	// The largest to is the whole run from from: every event there is,
	// not zero (the sum of the run's start and to must not overflow).
	var all, huge report.Timeline
	res := get(t, s, "/runs/beta/timeline.json?from=0&to=9223372036854775807")
	must(t, json.Unmarshal([]byte(body(t, res)), &huge))
	must(t, json.Unmarshal([]byte(body(t, get(t, s, "/runs/beta/timeline.json?from=0&to=1000000000000"))), &all))
	if res.StatusCode != 200 || len(huge.Events.Rank) == 0 || len(huge.Events.Rank) != len(all.Events.Rank) {
		t.Errorf("to=max int64: %d, %d events; the whole run has %d", res.StatusCode, len(huge.Events.Rank), len(all.Events.Rank))
	}
}

// Host names and the bearer scheme are case-insensitive.
func TestServeCaseInsensitiveHostAndScheme(t *testing.T) {
	runs, _ := fixture(t)
	s := newTestServer(t, Config{RunsDir: runs})
	for host, want := range map[string]int{"LOCALHOST:7070": 200, "LocalHost": 200, "localhost.": 200, "App.LOCALHOST:7070": 200,
		"EVIL.example": 403, "localhost.evil.example": 403} {
		req := httptest.NewRequest(http.MethodGet, "/api/runs", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %s: %d, want %d", host, rec.Code, want)
		}
	}
	st := newTestServer(t, Config{RunsDir: runs, Token: "tok"})
	for h, want := range map[string]int{"bearer tok": 200, "BEARER tok": 200, "Bearer  tok": 200, "bearer tok2": 401, "Basic tok": 401, "tok": 401, "bearertok": 401} {
		if res := get(t, st, "/api/runs", "Authorization", h); res.StatusCode != want {
			t.Errorf("Authorization %q: %d, want %d", h, res.StatusCode, want)
		}
	}
}
