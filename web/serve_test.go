package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/load"
	"github.com/commprof/commprof/report"
	"github.com/commprof/commprof/trace"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const secret = "TOPSECRET-7f3a"

// fixture makes a runs directory, and beside it a directory that must
// never be served:
//
//	runs/alpha      a finished 2-rank run, started 2h ago
//	runs/beta       a finished 4-rank run, started 1h ago, named <script>…, with an accuracy
//	runs/empty      an empty directory: not a run
//	runs/.hidden    a run in a hidden directory: not served
//	runs/notes.txt  a file
//	runs/link       a symlink to a run outside
//	runs/mixed      a run whose stream is a symlink to a stream outside
//	outside/secret  a run named TOPSECRET, and outside/secret.txt
func fixture(t *testing.T) (runs, outside string) {
	t.Helper()
	base := t.TempDir()
	runs, outside = filepath.Join(base, "runs"), filepath.Join(base, "outside")
	now := time.Now()
	writeRun(t, filepath.Join(runs, "alpha"), 2, trace.Manifest{Name: "alpha", Start: now.Add(-2 * time.Hour),
		Config: map[string]string{"batch_size": "64"}}, 20)
	writeRun(t, filepath.Join(runs, "beta"), 4, trace.Manifest{Name: evilName, Start: now.Add(-time.Hour),
		Config: map[string]string{"batch_size": "128"}, Metrics: map[string]float64{"test_accuracy": 0.9123}}, 20)
	writeRun(t, filepath.Join(runs, ".hidden"), 2, trace.Manifest{Name: secret}, 2)
	writeRun(t, filepath.Join(outside, "secret"), 2, trace.Manifest{Name: secret}, 2)
	must(t, os.MkdirAll(filepath.Join(runs, "empty"), 0o755))
	must(t, os.WriteFile(filepath.Join(runs, "notes.txt"), []byte(secret), 0o644))
	must(t, os.WriteFile(filepath.Join(outside, "secret.txt"), []byte(secret), 0o644))
	must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(runs, "link")))
	mixed := filepath.Join(runs, "mixed")
	writeRun(t, mixed, 1, trace.Manifest{Name: "mixed"}, 2)
	must(t, os.Remove(filepath.Join(mixed, trace.RankFile(0))))
	must(t, os.Symlink(filepath.Join(outside, "secret", trace.RankFile(0)), filepath.Join(mixed, trace.RankFile(0))))
	return runs, outside
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func newTestServer(t *testing.T, cfg Config) *server {
	t.Helper()
	s, err := newServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// get sends a request for target (a raw request-target, not cleaned) to
// h and returns the response.
func get(t *testing.T, h http.Handler, target string, header ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.Host = "127.0.0.1:7070"
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestServeIndexListsAndEscapes(t *testing.T) {
	runs, _ := fixture(t)
	s := newTestServer(t, Config{RunsDir: runs})
	res := get(t, s, "/")
	page := body(t, res)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %d\n%s", res.StatusCode, page)
	}
	for k, want := range map[string]string{
		"Content-Type":            "text/html; charset=utf-8",
		"X-Content-Type-Options":  "nosniff",
		"Content-Security-Policy": ContentSecurityPolicy,
	} {
		if got := res.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if strings.Contains(page, evilName) || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the run named %s is not escaped on the index", evilName)
	}
	for _, bad := range []string{secret, `data-run="empty"`, `data-run=".hidden"`, "notes.txt", `data-run="link"`, `data-run="mixed"`, " src=", `href="http`} {
		if strings.Contains(page, bad) {
			t.Errorf("the index contains %q", bad)
		}
	}
	// One script, the page's own, and nothing from a trace in it.
	if n := strings.Count(page, "<script"); n != 1 || strings.Contains(page, "<script>alert") {
		t.Errorf("the index holds %d scripts, want 1", n)
	}
	b, a := strings.Index(page, `data-run="beta"`), strings.Index(page, `data-run="alpha"`)
	if a < 0 || b < 0 || b > a {
		t.Errorf("want beta (newer) then alpha: at %d and %d", b, a)
	}
	for _, want := range []string{`href="runs/beta/"`, `href="runs/beta/stats.json"`, `href="runs/alpha/"`, `action="diff"`,
		`<option value="alpha" selected>`, `<option value="beta" selected>`, "91.23%", `data-status="complete"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the index lacks %s", want)
		}
	}

	res = get(t, s, "/api/runs")
	var list struct {
		Runs []report.RunEntry `json:"runs"`
	}
	if err := json.Unmarshal([]byte(body(t, res)), &list); err != nil || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("/api/runs: %v (%s)", err, res.Header.Get("Content-Type"))
	}
	if len(list.Runs) != 2 || list.Runs[0].Name != "beta" || list.Runs[1].Name != "alpha" {
		t.Fatalf("/api/runs: %+v", list.Runs)
	}
	bt := list.Runs[0]
	if bt.Title != evilName || bt.WorldSize != 4 || bt.Status != trace.StatusComplete || bt.Steps != 20 || bt.StepNS != 1_900_000 ||
		bt.Accuracy == nil || *bt.Accuracy != 0.9123 || bt.BusBWGBps <= 0 || bt.CommFraction <= 0 || bt.Events == 0 || bt.Report != "runs/beta/" {
		t.Errorf("beta: %+v", bt)
	}
	if list.Runs[1].Accuracy != nil {
		t.Errorf("alpha has no accuracy, got %v", *list.Runs[1].Accuracy)
	}
}

func TestServeEmptyIndex(t *testing.T) {
	s := newTestServer(t, Config{RunsDir: t.TempDir()})
	res := get(t, s, "/")
	if page := body(t, res); res.StatusCode != 200 || !strings.Contains(page, `id="no-runs"`) {
		t.Fatalf("empty runs directory: %d\n%s", res.StatusCode, page)
	}
	if page := body(t, get(t, s, "/api/runs")); !strings.Contains(page, `"runs": []`) {
		t.Fatalf("/api/runs of nothing: %s", page)
	}
}

func TestServeNewErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	must(t, os.WriteFile(file, nil, 0o644))
	for _, d := range []string{"", filepath.Join(dir, "nosuch"), file} {
		if _, err := New(Config{RunsDir: d}); err == nil {
			t.Errorf("New(%q): no error", d)
		} else if d != "" && !strings.Contains(err.Error(), d) {
			t.Errorf("New(%q): %v does not name it", d, err)
		}
	}
}

// Nothing outside the runs directory is served, whatever the path.
func TestServeNoPathOutsideRuns(t *testing.T) {
	runs, outside := fixture(t)
	must(t, os.Symlink(filepath.Join(runs, "alpha"), filepath.Join(runs, "alias")))
	s := newTestServer(t, Config{RunsDir: runs})
	for _, target := range []string{
		"/runs/../../outside/secret.txt",
		"/runs/..%2f..%2foutside%2fsecret.txt",
		"/runs/%2e%2e/",
		"/runs/%2e%2e/stats.json",
		"/runs/%2E%2E/%2E%2E/outside/secret/",
		"/runs/..%2foutside%2fsecret/",
		"/runs/..%5coutside%5csecret/",
		"/runs/alpha%2f..%2f..%2foutside%2fsecret/stats.json",
		"/runs/" + strings.ReplaceAll(filepath.Join(outside, "secret"), "/", "%2f") + "/stats.json",
		"/runs//" + filepath.Join(outside, "secret") + "/",
		"//" + filepath.Join(outside, "secret.txt"),
		"/runs/alpha/../../../outside/secret.txt",
		"/runs/link/",
		"/runs/link/stats.json",
		"/runs/link/live.json",
		"/runs/link",
		"/runs/mixed/",
		"/runs/mixed/stats.json",
		"/runs/.hidden/",
		"/runs/.hidden/stats.json",
		"/runs/empty/",
		"/runs/notes.txt/",
		"/runs/nosuch/",
		"/runs/alpha/run.json",
		"/runs/alpha/rank-00000.arrows",
		"/diff?a=alpha&b=link",
		"/diff?a=../outside/secret&b=alpha",
		"/diff?a=alpha&b=" + filepath.Join(outside, "secret"),
		"/outside/secret.txt",
	} {
		res := get(t, s, target)
		page := body(t, res)
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", target, res.StatusCode)
		}
		if strings.Contains(page, secret) {
			t.Errorf("GET %s returned the secret", target)
		}
		if !strings.Contains(page, "no run") && !strings.Contains(page, "No such page") && !strings.Contains(page, "no page") {
			t.Errorf("GET %s: no clear message:\n%s", target, page)
		}
	}
	// A symlink to a run inside the runs directory is a run.
	if res := get(t, s, "/runs/alias/stats.json"); res.StatusCode != http.StatusOK {
		t.Errorf("a link to a run inside: %d", res.StatusCode)
	}
	if res := get(t, s, "/runs/alias"); res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/runs/alias/" {
		t.Errorf("/runs/alias: %d to %q", res.StatusCode, res.Header.Get("Location"))
	}
}

func TestServeOnlyGetAndHead(t *testing.T) {
	runs, _ := fixture(t)
	s := newTestServer(t, Config{RunsDir: runs})
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, "PROPFIND"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(m, "/runs/alpha/", strings.NewReader("x"))
		req.Host = "localhost"
		s.ServeHTTP(rec, req)
		if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("%s: %d, Allow %q", m, rec.Code, rec.Header().Get("Allow"))
		}
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodHead, "/runs/alpha/stats.json", nil)
	req.Host = "localhost"
	s.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || rec.Body.Len() != 0 || rec.Header().Get("Content-Length") == "" {
		t.Errorf("HEAD: %d, %d bytes, length %q", rec.Code, rec.Body.Len(), rec.Header().Get("Content-Length"))
	}
}

func TestServeToken(t *testing.T) {
	runs, _ := fixture(t)
	const token = "s3cret-token"
	ts := httptest.NewServer(newTestServer(t, Config{RunsDir: runs, Token: token}))
	defer ts.Close()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: ts.Client().Transport, Jar: jar}
	fetch := func(path string, header ...string) (int, string, *http.Response) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, body(t, res), res
	}
	for _, tc := range []struct {
		path   string
		header []string
		want   int
	}{
		{"/", nil, 401},
		{"/runs/alpha/stats.json", nil, 401},
		{"/?token=wrong", nil, 401},
		{"/api/runs", []string{"Authorization", "Bearer wrong"}, 401},
		{"/api/runs", []string{"Authorization", "Bearer " + token}, 200},
		{"/runs/alpha/stats.json", []string{"Authorization", "Bearer " + token}, 200},
		{"/runs/alpha/stats.json", nil, 401}, // the header set no cookie
	} {
		code, page, res := fetch(tc.path, tc.header...)
		if code != tc.want {
			t.Errorf("GET %s %v: %d, want %d", tc.path, tc.header, code, tc.want)
		}
		if code == 401 {
			if strings.Contains(page, "alpha") || !strings.Contains(page, "token") || res.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("GET %s: 401 page:\n%s", tc.path, page)
			}
		}
	}
	// The token in the query sets a cookie that later requests carry.
	code, _, res := fetch("/?token=" + token)
	if code != 200 {
		t.Fatalf("with ?token: %d", code)
	}
	sc := res.Header.Get("Set-Cookie")
	if !strings.Contains(sc, TokenCookie+"="+token) || !strings.Contains(sc, "HttpOnly") || !strings.Contains(sc, "SameSite=Strict") {
		t.Errorf("Set-Cookie: %q", sc)
	}
	for _, p := range []string{"/runs/alpha/stats.json", "/api/runs", "/"} {
		if code, _, _ := fetch(p); code != 200 {
			t.Errorf("GET %s with the cookie: %d", p, code)
		}
	}
}

// Without a token only requests to localhost or an IP address are
// answered, so that another site cannot rebind its own name to 127.0.0.1.
func TestServeHostWithoutToken(t *testing.T) {
	runs, _ := fixture(t)
	s := newTestServer(t, Config{RunsDir: runs})
	for host, want := range map[string]int{"127.0.0.1:7070": 200, "localhost:7070": 200, "[::1]:7070": 200, "10.1.2.3": 200,
		"attacker.example:7070": 403, "attacker.example": 403} {
		req := httptest.NewRequest(http.MethodGet, "/api/runs", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %s: %d, want %d", host, rec.Code, want)
		}
	}
}

// stats.json is the summary `commprof stats --format json` prints.
func TestServeStatsJSON(t *testing.T) {
	runs, _ := fixture(t)
	s := newTestServer(t, Config{RunsDir: runs})
	sum, err := load.Summary(context.Background(), filepath.Join(runs, "beta"))
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetIndent("", " ")
	must(t, enc.Encode(sum))
	res := get(t, s, "/runs/beta/stats.json")
	got := body(t, res)
	if res.StatusCode != 200 || got != want.String() {
		t.Fatalf("stats.json: %d, %d bytes, want the summary's %d", res.StatusCode, len(got), want.Len())
	}
	if res.Header.Get("Content-Type") != "application/json" || res.Header.Get("ETag") == "" {
		t.Errorf("headers: %v", res.Header)
	}
	var back analyze.Summary
	must(t, json.Unmarshal([]byte(got), &back))
	if back.Run.Name != evilName || back.Run.WorldSize != 4 {
		t.Errorf("decoded: %+v", back.Run)
	}
	if res := get(t, s, "/runs/beta/stats.json", "If-None-Match", res.Header.Get("ETag")); res.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match: %d", res.StatusCode)
	}
	res = get(t, s, "/runs/nosuch/stats.json")
	if page := body(t, res); res.StatusCode != 404 || res.Header.Get("Content-Type") != "application/json" || !strings.Contains(page, `"error"`) {
		t.Errorf("unknown run's stats.json: %d %s", res.StatusCode, page)
	}
}

// A run's page reads the run once for its summary and its timeline when
// the summary is not cached yet, and only the timeline's columns when it
// is; either way the page is the same.
func TestServeReportReadsTheRunOnce(t *testing.T) {
	runs, _ := fixture(t)
	server := func() (*server, func() []string) {
		var mu sync.Mutex
		var logs []string
		s := newTestServer(t, Config{RunsDir: runs, Logf: func(format string, args ...any) {
			mu.Lock()
			logs = append(logs, fmt.Sprintf(format, args...))
			mu.Unlock()
		}})
		return s, func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(logs)
		}
	}
	s1, logs1 := server()
	once := body(t, get(t, s1, "/runs/alpha/"))
	if l := logs1(); len(l) != 1 || !strings.HasPrefix(l[0], "report of alpha") || !strings.HasSuffix(l[0], "(read once)") {
		t.Fatalf("logs %q, want one report read once", l)
	}
	s2, logs2 := server()
	get(t, s2, "/runs/alpha/stats.json")
	twice := body(t, get(t, s2, "/runs/alpha/"))
	if l := logs2(); len(l) != 1 || !strings.HasSuffix(l[0], "(its timeline read again)") {
		t.Fatalf("logs %q, want one report whose timeline read the run again", l)
	}
	if once != twice || !strings.Contains(once, `id="timeline-data"`) {
		t.Fatal("the page read once differs from the page read twice")
	}
}

func TestServeReportIsCached(t *testing.T) {
	runs, _ := fixture(t)
	var mu sync.Mutex
	reports := map[string]int{}
	s := newTestServer(t, Config{RunsDir: runs, CacheSize: 2, Logf: func(format string, args ...any) {
		if strings.HasPrefix(format, "report of") {
			mu.Lock()
			reports[args[0].(string)]++
			mu.Unlock()
		}
	}})
	count := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return reports[name]
	}
	// Concurrent first requests draw the report once.
	var wg sync.WaitGroup
	pages := make([]string, 8)
	for i := range pages {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := get(t, s, "/runs/alpha/")
			pages[i] = body(t, res)
			if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/html; charset=utf-8" {
				t.Errorf("report: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
			}
		}()
	}
	wg.Wait()
	if count("alpha") != 1 {
		t.Fatalf("8 concurrent requests drew the report %d times", count("alpha"))
	}
	for _, p := range pages[1:] {
		if p != pages[0] {
			t.Fatal("the same report differs between requests")
		}
	}
	if !strings.Contains(pages[0], `id="summary-data"`) || !strings.Contains(pages[0], `data-kind="run"`) || !strings.Contains(pages[0], "alpha") {
		t.Fatal("not the run's report")
	}
	// The report of beta escapes its name.
	if page := body(t, get(t, s, "/runs/beta/")); strings.Contains(page, evilName) {
		t.Fatal("the report shows the run's name unescaped")
	}
	// A change to the run's files draws it again.
	get(t, s, "/runs/alpha/")
	if count("alpha") != 1 {
		t.Fatalf("drawn %d times without a change", count("alpha"))
	}
	m, err := trace.ReadManifest(filepath.Join(runs, "alpha"))
	must(t, err)
	m.Metrics = map[string]float64{"test_accuracy": 0.5}
	must(t, trace.WriteManifest(filepath.Join(runs, "alpha"), m))
	must(t, os.Chtimes(filepath.Join(runs, "alpha", trace.ManifestFile), time.Now().Add(time.Minute), time.Now().Add(time.Minute)))
	if page := body(t, get(t, s, "/runs/alpha/")); count("alpha") != 2 || !strings.Contains(page, "50%") {
		t.Fatalf("after a change: drawn %d times", count("alpha"))
	}
	// The cache stays within its size.
	get(t, s, "/diff?a=alpha&b=beta")
	if n := s.pages.len(); n > 2 {
		t.Fatalf("%d pages kept, want at most 2", n)
	}
}

func TestServeDiff(t *testing.T) {
	runs, _ := fixture(t)
	s := newTestServer(t, Config{RunsDir: runs})
	res := get(t, s, "/diff?a=alpha&b=beta")
	page := body(t, res)
	if res.StatusCode != 200 || !strings.Contains(page, `data-kind="diff"`) || strings.Contains(page, evilName) {
		t.Fatalf("diff: %d", res.StatusCode)
	}
	for target, want := range map[string]int{"/diff": 400, "/diff?a=alpha": 400, "/diff?a=alpha&b=nosuch": 404, "/diff?a=nosuch&b=alpha": 404} {
		res := get(t, s, target)
		if page := body(t, res); res.StatusCode != want || !strings.Contains(page, "run") {
			t.Errorf("GET %s: %d, want %d\n%s", target, res.StatusCode, want, page)
		}
	}
}

// A run whose manifest says "running" gets the live page, whose data
// follows the streams as batches are appended.
func TestServeLive(t *testing.T) {
	runs := t.TempDir()
	rec := startRun(t, filepath.Join(runs, "live"), 3, trace.Manifest{Name: evilName}, 5)
	s := newTestServer(t, Config{RunsDir: runs})
	s.now = func() time.Time { return rec.m.Start.Add(90 * time.Second) }

	res := get(t, s, "/runs/live/")
	page := body(t, res)
	if res.StatusCode != 200 || !strings.Contains(page, `id="live-data"`) || strings.Contains(page, `id="summary-data"`) {
		t.Fatalf("live page: %d\n%s", res.StatusCode, page)
	}
	if strings.Contains(page, evilName) || !strings.Contains(page, "&lt;script&gt;") {
		t.Error("the live page shows the run's name unescaped")
	}
	if strings.Contains(page, "innerHTML") {
		t.Error("the live page's script uses innerHTML")
	}
	live := func() report.Live {
		t.Helper()
		res := get(t, s, "/runs/live/live.json")
		var l report.Live
		if err := json.Unmarshal([]byte(body(t, res)), &l); err != nil || res.StatusCode != 200 {
			t.Fatalf("live.json: %d %v", res.StatusCode, err)
		}
		return l
	}
	l := live()
	if !l.Running || l.Status != trace.StatusRunning || l.Events != rec.events() || l.ElapsedNS != int64(90*time.Second) ||
		l.Title != evilName || l.WorldSize != 3 || len(l.Ranks) != 3 || l.Problem != "" || l.DiskBytes == 0 {
		t.Fatalf("live: %+v", l)
	}
	for _, r := range l.Ranks {
		if r.Events != rec.events()/3 || r.Bytes == 0 || r.Host != "node0" {
			t.Errorf("rank %+v", r)
		}
	}
	before := l.Events
	rec.add(4)
	if l = live(); l.Events != rec.events() || l.Events <= before {
		t.Fatalf("after more batches: %d events, want %d", l.Events, rec.events())
	}
	// The report of what is recorded so far, on request.
	if page := body(t, get(t, s, "/runs/live/?partial=1")); !strings.Contains(page, `id="summary-data"`) {
		t.Error("?partial=1 is not the report")
	}
	// The index says it is running and links to the live page.
	if page := body(t, get(t, s, "/")); !strings.Contains(page, `data-status="running"`) || !strings.Contains(page, ">live</a>") {
		t.Error("the index does not show the running run")
	}
	rec.finish(trace.StatusComplete)
	if l = live(); l.Running || l.Status != trace.StatusComplete || l.Report != "./" || l.ElapsedNS != int64(time.Minute) {
		t.Fatalf("after the end: %+v", l)
	}
	if page := body(t, get(t, s, "/runs/live/")); !strings.Contains(page, `id="summary-data"`) {
		t.Fatal("a finished run still gets the live page")
	}
}

// A run that has written its manifest and nothing else yet is live, with
// no events.
func TestServeLiveBeforeFirstEvents(t *testing.T) {
	runs := t.TempDir()
	dir := filepath.Join(runs, "starting")
	rd, err := rundir.Take(dir, false)
	must(t, err)
	defer rd.Release()
	must(t, trace.WriteManifest(dir, &trace.Manifest{FormatVersion: trace.FormatVersion, Name: "starting", WorldSize: 2, Status: trace.StatusRunning, Start: time.Now()}))
	s := newTestServer(t, Config{RunsDir: runs})
	res := get(t, s, "/runs/starting/live.json")
	var l report.Live
	must(t, json.Unmarshal([]byte(body(t, res)), &l))
	if !l.Running || l.Events != 0 || l.Problem != "" {
		t.Fatalf("live: %+v", l)
	}
	if res := get(t, s, "/runs/starting/"); res.StatusCode != 200 {
		t.Fatalf("live page: %d", res.StatusCode)
	}
	if page := body(t, get(t, s, "/")); !strings.Contains(page, `data-run="starting"`) {
		t.Fatal("the index does not list the run that is starting")
	}
}

// timeline.json holds every event of the span asked for, and only those.
func TestServeTimelineDetail(t *testing.T) {
	runs, _ := fixture(t)
	s := newTestServer(t, Config{RunsDir: runs})
	run, err := trace.ReadRun(filepath.Join(runs, "beta"))
	must(t, err)
	first := int64(math.MaxInt64)
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			first = min(first, e.Start)
		}
	}
	var last int64
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			last = max(last, e.End()-first)
		}
	}
	from, to := last/3, last/2
	want := 0
	for _, rk := range run.Ranks {
		for _, e := range rk.Events {
			if e.Kind != trace.KindMark && e.Start-first < to && e.End()-first >= from {
				want++
			}
		}
	}
	res := get(t, s, fmt.Sprintf("/runs/beta/timeline.json?from=%d&to=%d", from, to))
	var td report.Timeline
	if res.StatusCode != 200 {
		t.Fatalf("timeline.json: %d %s", res.StatusCode, body(t, res))
	}
	must(t, json.Unmarshal([]byte(body(t, res)), &td))
	if len(td.Windows) != 1 || td.Windows[0] != [2]int64{from, to} || len(td.Events.Rank) != want || want == 0 {
		t.Fatalf("windows %v, %d events, want %d", td.Windows, len(td.Events.Rank), want)
	}
	row, at := [2]int32{-1, -1}, int64(0)
	for i := range td.Events.Rank {
		if r := [2]int32{td.Events.Rank[i], int32(td.Events.Lane[i])}; r != row {
			row, at = r, 0
		}
		at += td.Events.Start[i]
		if at >= to || at+td.Events.Dur[i] < from {
			t.Fatalf("event %d at %d..%d is outside [%d, %d)", i, at, at+td.Events.Dur[i], from, to)
		}
	}
	for _, q := range []string{"", "?from=10", "?from=a&to=b", "?from=20&to=10", "?from=-1&to=10"} {
		if res := get(t, s, "/runs/beta/timeline.json"+q); res.StatusCode != http.StatusBadRequest {
			t.Errorf("timeline.json%s: %d", q, res.StatusCode)
		}
	}
	if res := get(t, s, "/runs/nosuch/timeline.json?from=0&to=10"); res.StatusCode != http.StatusNotFound {
		t.Errorf("unknown run: %d", res.StatusCode)
	}
}
