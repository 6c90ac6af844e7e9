package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/commprof/commprof/internal/envnames"
)

// startServe starts `commprof serve args...` and returns it, the URL it
// printed and its standard error (to read once it has exited).
func startServe(t *testing.T, args ...string) (*exec.Cmd, *url.URL, *bytes.Buffer) {
	t.Helper()
	cmd, br, stderr := startCommprof(t, nil, append([]string{"serve"}, args...)...)
	line := make(chan string, 1)
	go func() {
		l, _ := br.ReadString('\n')
		line <- l
		_, _ = br.WriteTo(io.Discard)
	}()
	var l string
	select {
	case l = <-line:
	case <-time.After(30 * time.Second):
		t.Fatal("serve printed no URL in 30s")
	}
	_, raw, ok := strings.Cut(strings.TrimSpace(l), " at ")
	if !strings.HasPrefix(l, "serving the runs in ") || !ok {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("serve printed %q\n%s", l, stderr.String())
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("serve printed the URL %q: %v", raw, err)
	}
	return cmd, u, stderr
}

// sameJSON compares two JSON documents, whitespace aside: a summary of a
// run is the same on every read, to the last bit.
func sameJSON(a, b []byte) error {
	var ca, cb bytes.Buffer
	if err := json.Compact(&ca, a); err != nil {
		return err
	}
	if err := json.Compact(&cb, b); err != nil {
		return err
	}
	if !bytes.Equal(ca.Bytes(), cb.Bytes()) {
		return fmt.Errorf("the documents differ:\n%s\n%s", ca.Bytes(), cb.Bytes())
	}
	return nil
}

func fetchURL(t *testing.T, c *http.Client, u string) (int, []byte) {
	t.Helper()
	res, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

// stopServe interrupts serve as Ctrl-C does; it must stop promptly.
func stopServe(t *testing.T, cmd *exec.Cmd, stderr *bytes.Buffer) {
	t.Helper()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	code, took := waitExit(t, cmd, 10*time.Second)
	if code != exitOK && code != exitInterrupted {
		t.Errorf("exit %d after SIGINT\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopped") {
		t.Errorf("no word of stopping:\n%s", stderr.String())
	}
	t.Logf("stopped in %v with exit %d", took, code)
}

func TestServeRecordedRun(t *testing.T) {
	runs := t.TempDir()
	dir := recordBench(t, filepath.Join(runs, "ring"), "2", "allreduce", "ring", "64K")
	cmd, u, stderr := startServe(t, "--addr", "127.0.0.1:"+strconv.Itoa(freePort(t)), runs)
	if u.Hostname() != "127.0.0.1" || u.Query().Get("token") != "" {
		t.Errorf("URL %s: want 127.0.0.1 and no token", u)
	}
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	base := u.Scheme + "://" + u.Host
	code, page := fetchURL(t, c, base+"/")
	if code != 200 || !bytes.Contains(page, []byte(`data-run="ring"`)) {
		t.Errorf("GET /: %d\n%s", code, page)
	}
	code, page = fetchURL(t, c, base+"/runs/ring/")
	if code != 200 || !bytes.Contains(page, []byte(`id="summary-data"`)) {
		t.Errorf("GET the report: %d", code)
	}
	code, page = fetchURL(t, c, base+"/runs/ring/stats.json")
	want := commprof(t, nil, "stats", dir, "--format", "json")
	if code != 200 {
		t.Errorf("stats.json: %d", code)
	} else if err := sameJSON(page, []byte(want.stdout)); err != nil {
		t.Errorf("stats.json is not what `commprof stats --format json` prints: %v", err)
	}
	if code, _ := fetchURL(t, c, base+"/runs/..%2f..%2fetc/stats.json"); code != 404 {
		t.Errorf("a path outside the runs: %d", code)
	}
	stopServe(t, cmd, stderr)
}

// Off loopback serve warns, and requires a token, which it generates.
func TestServeNonLoopbackNeedsToken(t *testing.T) {
	runs := t.TempDir()
	port := strconv.Itoa(freePort(t))
	cmd, u, stderr := startServe(t, "--addr", "0.0.0.0:"+port, runs)
	token := u.Query().Get("token")
	if len(token) < 32 || u.Port() != port {
		t.Fatalf("URL %s: want the port %s and a generated token", u, port)
	}
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	base := "http://127.0.0.1:" + port
	if code, _ := fetchURL(t, c, base+"/"); code != http.StatusUnauthorized {
		t.Errorf("no token: %d", code)
	}
	if code, page := fetchURL(t, c, base+"/?token="+token); code != 200 || !bytes.Contains(page, []byte(`id="no-runs"`)) {
		t.Errorf("with the token: %d\n%s", code, page)
	}
	stopServe(t, cmd, stderr)
	out := stderr.String()
	if !strings.Contains(out, "warning: 0.0.0.0:"+port+" is not a loopback address") || !strings.Contains(out, "generated one: "+token) {
		t.Errorf("stderr:\n%s", out)
	}
}

func TestServeBadInvocations(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"serve", filepath.Join(dir, "nosuch")}, 1, "nosuch does not exist"},
		{[]string{"serve", "a", "b"}, 2, "at most 1 argument"},
		{[]string{"serve", "--addr", "7070", dir}, 2, "want host:port"},
		{[]string{"serve", "--addr", "127.0.0.1:99999", dir}, 2, "a port from 0 to 65535"},
	} {
		r := commprof(t, nil, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q\n%s", tc.args, r.code, tc.code, tc.want, r.stderr)
		}
	}
}

// BenchmarkServeTimelineLoad hammers `commprof serve` with 50 clients
// asking for timeline.json of a run of about a million events, as a page
// zoomed around by 50 people (or a hostile page in 50 tabs) would, and
// reports the server's peak RSS (VmHWM, over its whole life: reading the
// run, every build, the caches), the answers per second, the share
// answered 503 (busy; the clients ignore Retry-After and ask again at
// once), the latency of the 200s, and that of a person's requests for
// the list of runs and a run's stats.json meanwhile. The modes: "narrow"
// windows a tenth of the run wide, 90 distinct ones; "wide" windows of
// the whole run, every one distinct; "same", every client the same
// window. One op is one request.
//
//	go test ./cmd/commprof -run '^$' -bench ServeTimelineLoad -benchtime 400x
//
// COMMPROF_LOAD_RUN names a run directory to use instead of recording
// one (`commprof record --ranks 4 --out DIR -- bench allreduce -n 5100
// --max 64K`, 1,001,384 events).
func BenchmarkServeTimelineLoad(b *testing.B) {
	dir := os.Getenv(envnames.LoadRun)
	if dir == "" {
		dir = filepath.Join(b.TempDir(), "runs", "bench1m")
		out, err := exec.Command(bin, "record", "--ranks", "4", "--out", dir, "--", "bench", "allreduce", "-n", "5100", "--max", "64K").CombinedOutput()
		if err != nil {
			b.Fatalf("record: %v\n%s", err, out)
		}
	}
	out, err := exec.Command(bin, "stats", dir, "--format", "json").Output()
	if err != nil {
		b.Fatalf("stats %s: %v", dir, err)
	}
	var sum struct {
		Run struct {
			Events int64 `json:"events"`
			SpanNS int64 `json:"span_ns"`
		} `json:"run"`
	}
	if err := json.Unmarshal(out, &sum); err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: %d events over %.2fs", dir, sum.Run.Events, float64(sum.Run.SpanNS)/1e9)
	span := sum.Run.SpanNS
	name := filepath.Base(dir)
	timeline := func(from, to int64) string {
		return fmt.Sprintf("/runs/%s/timeline.json?from=%d&to=%d", name, from, to)
	}
	for _, mode := range []string{"narrow", "wide", "same", "pages"} {
		b.Run(mode, func(b *testing.B) {
			clients, retry := 50, false
			path := func(i int64) string {
				switch mode {
				case "narrow":
					from := span / 100 * (i % 90)
					return timeline(from, from+span/10)
				case "wide":
					return timeline(i, span+1)
				case "pages":
					// Half the requests for the report page, half for
					// windows from 1 ms to 1 s wide at places spread
					// over the run; a 503 is retried after its
					// Retry-After, as a browser's user would.
					if i%2 == 0 {
						return "/runs/" + name + "/"
					}
					from := span / 97 * (i % 97)
					return timeline(from, from+[]int64{1e6, 1e8, 1e9}[i%3])
				}
				return timeline(span/3, span/3+span/10)
			}
			if mode == "pages" {
				clients, retry = 20, true
			}
			serveLoad(b, filepath.Dir(dir), name, clients, retry, path)
		})
	}
}

// serveLoad has clients send b.N requests for path(i) at once against
// commprof serve, ignoring a 503's Retry-After or (retry) waiting it out
// and asking again, and reports the answers and the server's peak RSS.
func serveLoad(b *testing.B, runs, name string, clients int, retry bool, path func(i int64) string) {
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", runs)
	cmd.Env = cleanEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	}()
	br := bufio.NewReader(stdout)
	line, _ := br.ReadString('\n')
	_, raw, found := strings.Cut(strings.TrimSpace(line), " at ")
	if !found {
		b.Fatalf("serve printed %q", line)
	}
	base := strings.TrimSuffix(raw, "/")
	go func() { _, _ = io.Copy(io.Discard, br) }()
	c := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer c.CloseIdleConnections()
	fetch := func(u string) (int, time.Duration) {
		t0 := time.Now()
		res, err := c.Get(u)
		if err != nil {
			b.Error(err)
			return 0, 0
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode, time.Since(t0)
	}
	if code, _ := fetch(base + "/runs/" + name + "/stats.json"); code != 200 {
		b.Fatalf("stats.json: %d", code)
	}
	var (
		mu            sync.Mutex
		lat, probes   []time.Duration
		ok, busy, bad int
		next          atomic.Int64
		done          = make(chan struct{})
	)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				code, d := fetch(base + path(i))
				for retry && code == http.StatusServiceUnavailable {
					mu.Lock()
					busy++
					mu.Unlock()
					time.Sleep(2 * time.Second) // serve's Retry-After
					var again time.Duration
					code, again = fetch(base + path(i))
					d += again
				}
				mu.Lock()
				switch code {
				case 200:
					ok++
					lat = append(lat, d)
				case http.StatusServiceUnavailable:
					busy++
				default:
					bad++
				}
				mu.Unlock()
			}
		}()
	}
	// A person meanwhile: the list of runs and a run's stats.
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		for {
			select {
			case <-done:
				return
			case <-time.After(200 * time.Millisecond):
			}
			for _, p := range []string{"/", "/runs/" + name + "/stats.json"} {
				if code, d := fetch(base + p); code == 200 {
					mu.Lock()
					probes = append(probes, d)
					mu.Unlock()
				}
			}
		}
	}()
	wg.Wait()
	close(done)
	<-probeDone
	took := time.Since(start)
	b.StopTimer()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	hwm := int64(0)
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			hwm, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	if bad > 0 {
		b.Errorf("%d answers neither 200 nor 503", bad)
	}
	if retry && ok != b.N {
		b.Errorf("%d of %d requests answered 200 after their retries", ok, b.N)
	}
	pct := func(d []time.Duration, p float64) float64 {
		if len(d) == 0 {
			return 0
		}
		slices.Sort(d)
		return float64(d[min(len(d)-1, int(p*float64(len(d))))].Microseconds()) / 1000
	}
	b.ReportMetric(float64(hwm)/1024, "peak-RSS-MB")
	b.ReportMetric(float64(ok)/took.Seconds(), "200/s")
	b.ReportMetric(float64(busy)/float64(max(1, ok+busy)), "503-share")
	b.ReportMetric(pct(lat, 0.5), "p50-ms")
	b.ReportMetric(pct(lat, 0.99), "p99-ms")
	b.ReportMetric(pct(probes, 0.99), "probe-p99-ms")
}

// The list of runs says what the runs' own summaries say: every
// configuration column of every run (train runs, and the runs of a real
// sweep) is checked against `commprof stats --format json`, the sweep's
// row against its sweep.json, and a run whose recorder was killed reads
// "abandoned".
func TestServeListMatchesStats(t *testing.T) {
	runs := t.TempDir()
	train := []string{"--", "train", "--epochs", "1", "--synthetic-size", "3000"}
	for _, r := range []struct {
		name string
		args []string
	}{
		{"bs32", []string{"--ranks", "2"}},
		{"bs128-linear", []string{"--ranks", "4"}},
	} {
		args := append([]string{"record", "--out", filepath.Join(runs, r.name)}, r.args...)
		args = append(args, train...)
		if r.name == "bs32" {
			args = append(args, "--batch-size", "32")
		} else {
			args = append(args, "--batch-size", "128", "--lr-scaling", "linear", "--warmup-epochs", "0.5")
		}
		if res := commprof(t, nil, args...); res.code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, res.code, res.stderr)
		}
	}
	if res := commprof(t, nil, "sweep", "--out", filepath.Join(runs, "sw"), "--batch-sizes", "64,256", "--ranks", "2", "--", "train", "--epochs", "1",
		"--synthetic-size", "3000"); res.code != 0 {
		t.Fatalf("sweep: exit %d\n%s", res.code, res.stderr)
	}
	// A recording killed halfway: run.json keeps saying running.
	killed := filepath.Join(runs, "killed")
	rec := exec.Command(bin, "record", "--ranks", "2", "--out", killed, "--", "train", "--epochs", "50")
	rec.Env = cleanEnv()
	if err := rec.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if fi, err := os.Stat(filepath.Join(killed, "rank-00000.arrows")); err == nil && fi.Size() > 4096 {
			break
		}
		if time.Now().After(deadline) {
			_ = rec.Process.Kill()
			t.Fatal("the recording wrote nothing in 60s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The recorder and its ranks die at once (SIGKILL, an out-of-memory
	// kill): nobody finishes run.json. All are stopped before any is
	// killed, so that none can see another go and end the run itself:
	// a rank still running when the recorder dies takes its parent-death
	// signal (SIGTERM) and ends the run as interrupted; a recorder still
	// running when a rank dies ends it as failed.
	ranks := rankPIDs(t, rec.Process.Pid, 2)
	for _, pid := range ranks {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	for _, pid := range ranks {
		waitStopped(t, pid)
	}
	_ = rec.Process.Signal(syscall.SIGSTOP)
	waitStopped(t, rec.Process.Pid)
	for _, pid := range ranks {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = rec.Process.Kill()
	_ = rec.Wait()

	_, u, stderr := startServe(t, "--addr", "127.0.0.1:0", runs)
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	base := u.Scheme + "://" + u.Host
	code, page := fetchURL(t, c, base+"/api/runs")
	if code != 200 {
		t.Fatalf("/api/runs: %d\n%s", code, stderr.String())
	}
	type info struct {
		Name          string   `json:"name"`
		Kind          string   `json:"kind"`
		Status        string   `json:"status"`
		WorldSize     int      `json:"world_size"`
		BatchSize     int      `json:"batch_size"`
		GlobalBatch   int      `json:"global_batch"`
		LRScaling     string   `json:"lr_scaling"`
		WarmupEpochs  string   `json:"warmup_epochs"`
		SamplesPerSec float64  `json:"samples_per_sec"`
		Accuracy      *float64 `json:"accuracy"`
		Configs       int      `json:"configs"`
		Runs          []info   `json:"runs"`
	}
	var list struct{ Runs []info }
	if err := json.Unmarshal(page, &list); err != nil {
		t.Fatal(err)
	}
	byName := map[string]info{}
	for _, r := range list.Runs {
		byName[r.Name] = r
		for _, c := range r.Runs {
			byName[c.Name] = c
		}
	}
	checked := 0
	for name, ri := range byName {
		if ri.Kind == "sweep" {
			continue
		}
		var sum struct {
			Run struct {
				Status         string             `json:"status"`
				WorldSize      int                `json:"world_size"`
				Config         map[string]string  `json:"config"`
				Metrics        map[string]float64 `json:"metrics"`
				SamplesPerStep int                `json:"samples_per_step"`
			} `json:"run"`
			StepSummary struct {
				SamplesPerSec float64 `json:"samples_per_sec"`
			} `json:"step_summary"`
		}
		out := commprof(t, nil, "stats", filepath.Join(runs, name), "--format", "json")
		if err := json.Unmarshal([]byte(out.stdout), &sum); err != nil {
			t.Fatalf("stats %s: %v\n%s", name, err, out.stderr)
		}
		cfg := sum.Run.Config
		warm := cfg["warmup_epochs"]
		if warm == "0" {
			warm = ""
		}
		if fmt.Sprint(ri.BatchSize) != cfg["batch_size"] || ri.GlobalBatch != sum.Run.SamplesPerStep || ri.WorldSize != sum.Run.WorldSize ||
			ri.LRScaling != cfg["lr_scaling"] || ri.WarmupEpochs != warm || ri.SamplesPerSec != sum.StepSummary.SamplesPerSec || ri.SamplesPerSec <= 0 {
			t.Errorf("%s: listed %+v\nstats: config %v, samples/step %d, samples/s %v", name, ri, cfg, sum.Run.SamplesPerStep, sum.StepSummary.SamplesPerSec)
		}
		if acc, ok := sum.Run.Metrics["test_accuracy"]; ok != (ri.Accuracy != nil) || ok && acc != *ri.Accuracy {
			t.Errorf("%s: accuracy %v, stats %v", name, ri.Accuracy, sum.Run.Metrics)
		}
		if name == "killed" && sum.Run.Status != "abandoned" {
			t.Errorf("stats of a run whose recorder was killed says %q, want abandoned", sum.Run.Status)
		}
		if ri.Status != sum.Run.Status {
			t.Errorf("%s: status %q, stats says %q", name, ri.Status, sum.Run.Status)
		}
		checked++
	}
	if checked != 5 {
		t.Errorf("checked %d runs, want 5: %v", checked, byName)
	}
	// The killed recording's report says so too, and its readers change
	// nothing in it, not even what the recorder left (the space it set
	// aside, its locks): the next recording into it takes those.
	own := func() (names []string) {
		ents, _ := os.ReadDir(killed)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".commprof-") {
				names = append(names, e.Name())
			}
		}
		return names
	}
	before := own()
	if r := commprof(t, nil, "stats", killed); !strings.Contains(r.stdout, "abandoned") {
		t.Errorf("stats of the killed run:\n%s", r.stdout)
	}
	html := filepath.Join(t.TempDir(), "killed.html")
	if r := commprof(t, nil, "report", killed, "-o", html); r.code != 0 {
		t.Errorf("report of the killed run: exit %d\n%s", r.code, r.stderr)
	} else if b, err := os.ReadFile(html); err != nil || !bytes.Contains(b, []byte("abandoned")) {
		t.Errorf("the killed run's report does not say abandoned (%v)", err)
	}
	if after := own(); len(before) == 0 || !slices.Equal(before, after) {
		t.Errorf("the killed recording left %v; after its readers %v", before, after)
	}
	var sw struct {
		Configs []json.RawMessage `json:"configs"`
	}
	b, err := os.ReadFile(filepath.Join(runs, "sw", "sweep.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sw); err != nil {
		t.Fatal(err)
	}
	if s := byName["sw"]; s.Kind != "sweep" || s.Configs != len(sw.Configs) || s.Configs != 2 || len(s.Runs) != 2 {
		t.Errorf("the sweep: %+v", s)
	}
	if code, page := fetchURL(t, c, base+"/runs/sw/"); code != 200 || !bytes.Contains(page, []byte(`data-kind="sweep"`)) {
		t.Errorf("the sweep's page: %d", code)
	}
	if code, page := fetchURL(t, c, base+"/diff?a=sw/r2-bs64-lrnone-wu0&b=bs128-linear"); code != 200 || !bytes.Contains(page, []byte(`data-kind="diff"`)) {
		t.Errorf("a diff: %d", code)
	}
}
