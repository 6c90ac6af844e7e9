// Package web is the web server of `commprof serve`: http.Handlers over a
// directory of recorded runs. It lists the runs with their key numbers,
// serves each run's HTML report (generated on demand and kept in a bounded
// cache), its summary JSON and a diff of any two runs, and follows a run
// that is still being recorded on a live page.
//
// Every run is a directory directly under the runs directory; nothing
// outside it is ever read for a response, whatever the URL and whatever
// symlinks the directory holds. Pages allow only their own inline scripts
// and styles and same-origin fetches (Content-Security-Policy), and every
// string that comes from a trace is escaped.
package web

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/commprof/commprof/analyze"
	"github.com/commprof/commprof/internal/rundir"
	"github.com/commprof/commprof/internal/units"
	"github.com/commprof/commprof/report"
	"github.com/commprof/commprof/trace"
)

// Config configures the server.
type Config struct {
	// RunsDir is the directory whose subdirectories are the runs.
	RunsDir string
	// Token, when not empty, must come with every request: as the query
	// parameter token (the response then sets it as a cookie, so that the
	// page's links and fetches carry it), the cookie, or the header
	// "Authorization: Bearer TOKEN". Without it the server answers 401.
	// With no token the server answers only requests addressed to
	// localhost or an IP address, so that a web page cannot reach it
	// through a DNS name of its own that resolves to the loopback address.
	Token string
	// Logf logs the reports the server draws, the summaries that take it
	// more than a second, and the errors it answers with 500; nil logs
	// nothing. It may be called from
	// several goroutines at once.
	Logf func(format string, args ...any)
	// CacheSize is the most pages (reports, diffs, sweeps) and
	// timeline.json answers kept in memory (default 16); summaries are
	// kept for twice as many runs.
	CacheSize int
	// CacheBytes bounds the bytes of the pages and timeline.json answers
	// kept (default 128 MiB); summaries are kept in a quarter of it more.
	// An answer larger than the bound is sent and not kept.
	CacheBytes int64
	// MaxBuilds is the most expensive computations at once: reading a
	// run for its summary, drawing a report, a diff or a sweep page,
	// building a timeline.json answer (default 2). Each holds the events
	// it reads, so this bounds the server's memory. Identical requests
	// share one computation.
	MaxBuilds int
	// MaxQueue is the most requests waiting for a computation to start
	// (default 32), each for at most BuildWait (default 10s); beyond
	// either the server answers 503 with Retry-After.
	MaxQueue  int
	BuildWait time.Duration
	// LiveInterval is how often the live page of a run being recorded
	// fetches its progress (default 2s).
	LiveInterval time.Duration
	// ReportDetail is how many events a report page holds one by one
	// (default: as `commprof report`, 100,000); the page fetches the
	// events of any other span it is zoomed into from timeline.json.
	ReportDetail int
}

// TokenCookie is the name of the cookie that carries the token.
const TokenCookie = "commprof_token"

// ContentSecurityPolicy is the policy of every response: the pages'
// inline scripts and styles, data: images, fetches to the server itself,
// and nothing else.
const ContentSecurityPolicy = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

type server struct {
	cfg    Config
	root   string         // RunsDir, absolute, symlinks resolved
	pages  *cache[[]byte] // report, diff and sweep pages, timeline.json answers
	sums   *cache[*analyze.Summary]
	infos  *cache[listed]
	sweeps *cache[*analyze.Sweep]
	// densities are the runs' densities, for sizing timeline windows.
	densities *cache[*density]
	// bases are the parts of the runs' timelines that every window
	// shares: the occupancy bins, which take reading the whole run.
	bases  *cache[*report.TimelineBase]
	builds *limiter
	// windowEvents bounds the events a timeline.json build holds
	// (default windowEvents; tests set it smaller).
	windowEvents int64
	mux          *http.ServeMux
	// built, when set (by tests), is called as each build starts, holding
	// its slot: kind is summary, report, timeline or diff.
	built func(kind string)
	now   func() time.Time
	boot  string // when the server started, in the entity tags
}

// Defaults of Config.
const (
	defaultCacheBytes = 128 << 20
	defaultMaxBuilds  = 2
	defaultMaxQueue   = 32
	defaultBuildWait  = 10 * time.Second
)

// New returns the server's handler for the runs in cfg.RunsDir, which
// must be a directory. The handler is safe for concurrent use.
func New(cfg Config) (http.Handler, error) {
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func newServer(cfg Config) (*server, error) {
	if cfg.RunsDir == "" {
		return nil, errors.New("serve: no runs directory")
	}
	abs, err := filepath.Abs(cfg.RunsDir)
	if err != nil {
		return nil, fmt.Errorf("serve: runs directory %s: %w", cfg.RunsDir, err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("serve: runs directory %s: %w", cfg.RunsDir, err)
	}
	if fi, err := os.Stat(root); err != nil {
		return nil, fmt.Errorf("serve: runs directory %s: %w", cfg.RunsDir, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("serve: runs directory %s is not a directory", cfg.RunsDir)
	}
	if cfg.CacheSize <= 0 {
		cfg.CacheSize = 16
	}
	if cfg.LiveInterval <= 0 {
		cfg.LiveInterval = 2 * time.Second
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = defaultCacheBytes
	}
	if cfg.MaxBuilds <= 0 {
		cfg.MaxBuilds = defaultMaxBuilds
	}
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = defaultMaxQueue
	}
	if cfg.BuildWait <= 0 {
		cfg.BuildWait = defaultBuildWait
	}
	s := &server{cfg: cfg, root: root, now: time.Now, boot: strconv.FormatInt(time.Now().UnixNano(), 36),
		pages:        newSizedCache(cfg.CacheSize, cfg.CacheBytes, func(b []byte) int64 { return int64(len(b)) }),
		sums:         newSizedCache(2*cfg.CacheSize, cfg.CacheBytes/4, summarySize),
		infos:        newCache[listed](4096),
		sweeps:       newCache[*analyze.Sweep](64),
		densities:    newCache[*density](64),
		bases:        newCache[*report.TimelineBase](16),
		windowEvents: windowEvents,
		builds:       newLimiter(cfg.MaxBuilds, cfg.MaxQueue, cfg.BuildWait),
		mux:          http.NewServeMux(),
	}
	s.mux.HandleFunc("GET /{$}", s.handleIndex)
	s.mux.HandleFunc("GET /api/runs", s.handleAPIRuns)
	s.mux.HandleFunc("GET /diff", s.handleDiff)
	// A run is /runs/NAME/, or /runs/SWEEP/NAME/ inside a sweep, whose
	// own page is /runs/SWEEP/.
	for _, p := range []string{"/runs/{name}", "/runs/{sweep}/{name}"} {
		s.mux.HandleFunc("GET "+p, s.handleRunRedirect)
		s.mux.HandleFunc("GET "+p+"/{$}", s.handleRun)
		s.mux.HandleFunc("GET "+p+"/stats.json", s.handleStats)
		s.mux.HandleFunc("GET "+p+"/live.json", s.handleLive)
		s.mux.HandleFunc("GET "+p+"/timeline.json", s.handleTimeline)
		// What `commprof report` writes on disk beside the streams: a
		// page that links to a run's report.html works served too.
		s.mux.HandleFunc("GET "+p+"/report.html", func(w http.ResponseWriter, r *http.Request) {
			if s.lookupOrFail(w, r) != nil {
				http.Redirect(w, r, "./", http.StatusFound)
			}
		})
	}
	s.mux.HandleFunc("GET /runs/{name}/sweep.json", s.handleSweepJSON)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("There is no page %s here. The list of runs is at the server's root, /.", r.URL.Path))
	})
	return s, nil
}

func (s *server) logf(format string, args ...any) {
	if s.cfg.Logf != nil {
		s.cfg.Logf(format, args...)
	}
}

// ServeHTTP checks what every request must satisfy, then routes it.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache, private")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		s.fail(w, r, http.StatusMethodNotAllowed, fmt.Sprintf("%s is not allowed: this server only answers GET and HEAD.", r.Method))
		return
	}
	if !s.authorized(w, r) {
		return
	}
	// A path that is not clean (.., //, or their encodings) names nothing
	// here: say so rather than redirect to what it would clean to.
	p := r.URL.Path
	clean := path.Clean("/" + p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	if clean != p || strings.Contains(p, "\\") {
		s.fail(w, r, http.StatusNotFound, "No such page: the path must not contain \"..\", \"//\" or \"\\\".")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// authorized checks the token, and the Host header when there is none.
func (s *server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.Token == "" {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		// Host names are case-insensitive, and may end in a dot.
		host = strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"), "."))
		if host == "localhost" || strings.HasSuffix(host, ".localhost") || net.ParseIP(host) != nil {
			return true
		}
		s.fail(w, r, http.StatusForbidden, fmt.Sprintf("This server answers only requests to localhost or an IP address, not to %q: open the address it printed, or start it with --token.", r.Host))
		return false
	}
	match := func(t string) bool { return subtle.ConstantTimeCompare([]byte(t), []byte(s.cfg.Token)) == 1 }
	if t := r.URL.Query().Get("token"); t != "" && match(t) {
		http.SetCookie(w, &http.Cookie{Name: TokenCookie, Value: s.cfg.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
		return true
	}
	if c, err := r.Cookie(TokenCookie); err == nil && match(c.Value) {
		return true
	}
	// The scheme of an Authorization header is case-insensitive (RFC 9110).
	if scheme, t, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " "); ok && strings.EqualFold(scheme, "Bearer") && match(strings.TrimSpace(t)) {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="commprof"`)
	s.fail(w, r, http.StatusUnauthorized, "This server needs its token: open the URL that `commprof serve` printed (it ends in ?token=...), or send the header \"Authorization: Bearer TOKEN\".")
	return false
}

// fail answers with an error: JSON for the JSON endpoints, else a small
// page. msg is shown as text.
func (s *server) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	s.failPage(w, r, report.Problem{Code: code, Message: msg, Home: s.home(r)})
}

// failPage answers with the problem p: its message as JSON for the JSON
// endpoints, else its page.
func (s *server) failPage(w http.ResponseWriter, r *http.Request, p report.Problem) {
	h := w.Header()
	h.Del("ETag")
	h.Del("Last-Modified")
	if strings.HasSuffix(r.URL.Path, ".json") || strings.HasPrefix(r.URL.Path, "/api/") {
		h.Set("Content-Type", "application/json")
		w.WriteHeader(p.Code)
		json.NewEncoder(w).Encode(struct {
			Error string `json:"error"`
		}{p.Message})
		return
	}
	var buf bytes.Buffer
	if err := report.WriteProblem(&buf, p); err != nil {
		h.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(p.Code)
		fmt.Fprintln(w, p.Message)
		return
	}
	h.Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(p.Code)
	w.Write(buf.Bytes())
}

// failErr answers with err: 404 for a run that cannot be served, nothing
// for a request that went away, else 500.
func (s *server) failErr(w http.ResponseWriter, r *http.Request, what string, err error) {
	switch {
	case errors.Is(err, errNoRun):
		s.fail(w, r, http.StatusNotFound, what)
	case errors.Is(err, errBusy):
		running, waiting := s.builds.inFlight()
		w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		s.fail(w, r, http.StatusServiceUnavailable, fmt.Sprintf("%s: the server is busy (%d pages being drawn, %d more waiting; it draws %d at a time). Try again in a few seconds.",
			what, running, waiting, s.cfg.MaxBuilds))
	case isContextErr(err) && r.Context().Err() != nil:
		// The client went away or the server is stopping.
	default:
		s.logf("%s %s: %v", r.Method, r.URL.Path, err)
		s.fail(w, r, http.StatusInternalServerError, fmt.Sprintf("%s: %v", what, err))
	}
}

// retryAfter is the seconds a 503 asks the client to wait.
const retryAfter = 2

// home is the relative URL of the index from r's page.
func (s *server) home(r *http.Request) string {
	n := strings.Count(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if n == 0 {
		return "./"
	}
	return strings.Repeat("../", n)
}

func noRun(name string) string {
	return fmt.Sprintf("There is no run %q here: a run is a directory directly under the runs directory, or directly under a sweep's directory there, holding run.json or rank-NNNNN.arrows streams. The list of runs is at the server's root.", name)
}

// runID is the id of the run r's path names: NAME or SWEEP/NAME.
func runID(r *http.Request) string {
	if sweep := r.PathValue("sweep"); sweep != "" {
		return sweep + "/" + r.PathValue("name")
	}
	return r.PathValue("name")
}

// lookupOrFail resolves the run r's path names, or answers 404.
func (s *server) lookupOrFail(w http.ResponseWriter, r *http.Request) *run {
	id := runID(r)
	run, err := s.lookup(id)
	if err != nil {
		s.fail(w, r, http.StatusNotFound, noRun(id))
		return nil
	}
	return run
}

func (s *server) handleRunRedirect(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if _, err := s.lookup(runID(r)); err != nil {
		// A sweep's page is a directory's too.
		if _, serr := s.lookupSweep(name); r.PathValue("sweep") != "" || serr != nil {
			s.fail(w, r, http.StatusNotFound, noRun(runID(r)))
			return
		}
	}
	u := url.PathEscape(name) + "/"
	if r.URL.RawQuery != "" {
		u += "?" + r.URL.RawQuery
	}
	http.Redirect(w, r, u, http.StatusMovedPermanently)
}

// serveBytes answers with b, honouring conditional requests on its etag.
func serveBytes(w http.ResponseWriter, r *http.Request, contentType, etag string, mod time.Time, b []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("ETag", etag)
	http.ServeContent(w, r, "", mod, bytes.NewReader(b))
}

func (s *server) handleIndex(w http.ResponseWriter, r *http.Request) {
	runs, err := s.runs(r.Context())
	if err != nil {
		s.failErr(w, r, "listing the runs", err)
		return
	}
	var buf bytes.Buffer
	if err := report.WriteIndex(&buf, s.cfg.RunsDir, runs); err != nil {
		s.failErr(w, r, "drawing the list of runs", err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}

func (s *server) handleAPIRuns(w http.ResponseWriter, r *http.Request) {
	runs, err := s.runs(r.Context())
	if err != nil {
		s.failErr(w, r, "listing the runs", err)
		return
	}
	if runs == nil {
		runs = []report.RunEntry{}
	}
	writeJSON(w, struct {
		RunsDir string            `json:"runs_dir"`
		Runs    []report.RunEntry `json:"runs"`
	}{s.cfg.RunsDir, runs})
}

func writeJSON(w http.ResponseWriter, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(buf.Bytes())
}

// handleRun serves a run's report, or its live page while it is being
// recorded (?partial=1 asks for the report of what is recorded so far).
func (s *server) handleRun(w http.ResponseWriter, r *http.Request) {
	run, err := s.lookup(runID(r))
	if err != nil {
		if sd, serr := s.lookupSweep(r.PathValue("name")); r.PathValue("sweep") == "" && serr == nil {
			s.serveSweep(w, r, sd)
			return
		}
		s.fail(w, r, http.StatusNotFound, noRun(runID(r)))
		return
	}
	if m, err := trace.ReadManifest(run.dir); err == nil && rundir.Status(run.dir, m) == trace.StatusRunning && r.URL.Query().Get("partial") == "" {
		s.serveLivePage(w, r, run)
		return
	}
	etag := run.fp.etag("report", s.boot)
	if notModified(w, r, etag) {
		return
	}
	b, err := s.pages.get(r.Context(), "run\x00"+run.name+"\x00"+run.fp.key, func(ctx context.Context) ([]byte, error) {
		ctx, release, err := s.build(ctx, "report")
		if err != nil {
			return nil, err
		}
		defer release()
		start := time.Now()
		// A run not summarized yet is read once for the summary and the
		// timeline; else the timeline reads it for its own columns.
		sum, read, err := s.load(ctx, run, report.TimelineKeep(0))
		if err != nil {
			return nil, err
		}
		page, err := report.NewRunPage(ctx, run.dir, sum, read, report.RunPageOptions{
			Timeline: report.TimelineOptions{Detail: s.cfg.ReportDetail}, Page: report.Options{DetailURL: "timeline.json"}})
		if err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if err := page.Write(&buf); err != nil {
			return nil, err
		}
		how := "read once"
		if page.Reread {
			how = "its timeline read again"
		}
		s.logf("report of %s: %s in %s (%s)", run.name, units.Bytes(int64(buf.Len())), time.Since(start).Round(time.Millisecond), how)
		return buf.Bytes(), nil
	})
	if err != nil {
		s.failErr(w, r, "drawing the report of "+run.name, err)
		return
	}
	serveBytes(w, r, "text/html; charset=utf-8", etag, run.fp.modTime, b)
}

// build takes a build slot for a computation of kind, as limiter.acquire
// does.
func (s *server) build(ctx context.Context, kind string) (context.Context, func(), error) {
	ctx, release, err := s.builds.acquire(ctx)
	if err == nil && s.built != nil {
		s.built(kind)
	}
	return ctx, release, err
}

// notModified answers 304 when the client holds the answer of etag
// already, so that no build starts for it.
func notModified(w http.ResponseWriter, r *http.Request, etag string) bool {
	inm := r.Header.Get("If-None-Match")
	if inm == "" {
		return false
	}
	for _, t := range strings.Split(inm, ",") {
		if t = strings.TrimPrefix(strings.TrimSpace(t), "W/"); t == etag || t == "*" {
			w.Header().Set("ETag", etag)
			w.WriteHeader(http.StatusNotModified)
			return true
		}
	}
	return false
}

// detailEvents bounds the events of one span the timeline fetches, and
// windowEvents the events a build of one holds before it picks them.
const (
	detailEvents = 200_000
	windowEvents = detailEvents * 5 / 4
)

// handleTimeline serves the report timeline's data with every event of
// the span [from, to) (ns since the run's first event) in detail, for a
// report page zoomed into a stretch it holds only as occupancy. Answers
// are kept in the page cache, and identical requests share one build.
func (s *server) handleTimeline(w http.ResponseWriter, r *http.Request) {
	run := s.lookupOrFail(w, r)
	if run == nil {
		return
	}
	q := r.URL.Query()
	from, msg := nsParam(q, "from")
	to, msgTo := nsParam(q, "to")
	switch {
	case msg != "":
	case msgTo != "":
		msg = msgTo
	case to <= from:
		msg = fmt.Sprintf("to=%d is not after from=%d", to, from)
	default:
		s.serveTimeline(w, r, run, from, to)
		return
	}
	s.fail(w, r, http.StatusBadRequest, "timeline.json takes from and to, ns since the run's start, with from < to: "+msg)
}

// nsParam reads the query parameter name as ns: a whole number from 0
// to the largest int64. The message says what is wrong, naming the
// parameter; it is empty when the value is good.
func nsParam(q url.Values, name string) (int64, string) {
	v := q.Get(name)
	if v == "" {
		return 0, name + " is missing"
	}
	n, err := strconv.ParseInt(v, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, fmt.Sprintf("%s=%.40s is out of range: the largest is %d", name, v, int64(math.MaxInt64))
	case err != nil:
		return 0, fmt.Sprintf("%s=%.40q is not a whole number of ns", name, v)
	case n < 0:
		return 0, fmt.Sprintf("%s=%d is negative", name, n)
	}
	return n, ""
}

func (s *server) serveTimeline(w http.ResponseWriter, r *http.Request, run *run, from, to int64) {
	etag := run.fp.etag(fmt.Sprintf("timeline-%d-%d", from, to), s.boot)
	if notModified(w, r, etag) {
		return
	}
	key := fmt.Sprintf("timeline\x00%s\x00%s\x00%d\x00%d", run.name, run.fp.key, from, to)
	b, err := s.pages.get(r.Context(), key, func(ctx context.Context) ([]byte, error) {
		ctx, release, err := s.build(ctx, "timeline")
		if err != nil {
			return nil, err
		}
		defer release()
		sum, err := s.summary(ctx, run)
		if err != nil {
			return nil, err
		}
		// Nothing lies past the run's end: a window beyond it is the
		// same window, and the sum of the run's start and a huge to
		// must not overflow.
		end := max(sum.Run.SpanNS+1, 1)
		if from >= end {
			from, to = end, end+1
		}
		to = min(to, end)
		// The build holds every event of its window before it picks those
		// it sends: a window of more than about the detail it sends is
		// cut around its middle first, so that memory stays bounded
		// whatever the window.
		if sum.Run.Events > s.windowEvents {
			d, err := s.density(ctx, run, sum)
			if err != nil {
				return nil, err
			}
			from, to = d.shrink(from, to, s.windowEvents)
		}
		// The bins come from the run's base, read whole once; the window
		// reads only the batches that hold its events.
		base, err := s.bases.get(ctx, run.name+"\x00"+run.fp.key, func(ctx context.Context) (*report.TimelineBase, error) {
			tl, err := report.ReadTimeline(ctx, run.dir, sum, report.TimelineOptions{Detail: 1})
			if err != nil {
				return nil, err
			}
			return tl.Base(), nil
		})
		if err != nil {
			return nil, err
		}
		tl, err := report.ReadTimelineWindow(ctx, run.dir, sum, report.TimelineOptions{Detail: detailEvents, Window: [2]int64{from, to}}, base)
		if err != nil {
			return nil, err
		}
		return json.Marshal(tl)
	})
	if err != nil {
		s.failErr(w, r, "reading the timeline of "+run.name, err)
		return
	}
	serveBytes(w, r, "application/json", etag, run.fp.modTime, b)
}

// handleStats serves a run's summary as `commprof stats --format json`
// prints it.
func (s *server) handleStats(w http.ResponseWriter, r *http.Request) {
	run := s.lookupOrFail(w, r)
	if run == nil {
		return
	}
	sum, err := s.summary(r.Context(), run)
	if err != nil {
		s.failErr(w, r, "summarizing "+run.name, err)
		return
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", " ")
	if err := enc.Encode(sum); err != nil {
		s.failErr(w, r, "encoding the summary of "+run.name, err)
		return
	}
	serveBytes(w, r, "application/json", run.fp.etag("stats", s.boot), run.fp.modTime, buf.Bytes())
}

// handleDiff serves the diff report of runs a and b.
func (s *server) handleDiff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	na, nb := q.Get("a"), q.Get("b")
	if na == "" || nb == "" {
		s.fail(w, r, http.StatusBadRequest, "A diff needs two runs: /diff?a=RUN&b=RUN, with run names from the list of runs.")
		return
	}
	a, err := s.lookup(na)
	if err != nil {
		s.fail(w, r, http.StatusNotFound, "A: "+noRun(na))
		return
	}
	b, err := s.lookup(nb)
	if err != nil {
		s.fail(w, r, http.StatusNotFound, "B: "+noRun(nb))
		return
	}
	etag := `"diff-` + s.boot + "-" + a.fp.key + "-" + b.fp.key + `"`
	if notModified(w, r, etag) {
		return
	}
	page, err := s.pages.get(r.Context(), "diff\x00"+a.name+"\x00"+a.fp.key+"\x00"+b.name+"\x00"+b.fp.key, func(ctx context.Context) ([]byte, error) {
		ctx, release, err := s.build(ctx, "diff")
		if err != nil {
			return nil, err
		}
		defer release()
		sa, err := s.summary(ctx, a)
		if err != nil {
			return nil, fmt.Errorf("reading A, %s: %w", a.name, err)
		}
		sb, err := s.summary(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("reading B, %s: %w", b.name, err)
		}
		var buf bytes.Buffer
		if err := report.WriteDiffHTML(&buf, sa, sb, analyze.Compare(sa, sb)); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	})
	if err != nil {
		s.failErr(w, r, fmt.Sprintf("comparing %s with %s", a.name, b.name), err)
		return
	}
	mod := a.fp.modTime
	if b.fp.modTime.After(mod) {
		mod = b.fp.modTime
	}
	serveBytes(w, r, "text/html; charset=utf-8", etag, mod, page)
}
