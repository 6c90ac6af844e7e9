// Package webtest opens pages in headless Chromium for tests: it runs
// tools/check-page.mjs (node and playwright-core) and returns what the
// page did — console and page errors, dialogs, external and failed
// requests, undrawn charts, a timeline tooltip, timings — for the test to
// judge. docs/web.md describes the harness.
package webtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/commprof/commprof/internal/envnames"
)

// Options says what CheckPage does on the page besides loading it.
type Options struct {
	// Screenshot is the PNG file to write after the page has drawn (and
	// after the hover); empty for none.
	Screenshot string
	// FullPage makes the screenshot cover the whole page, not the window.
	FullPage bool
	// HoverEvent is the index of the timeline event to hover, whose
	// tooltip text Result.Tooltip holds; -1 for none. Note that 0 hovers
	// event 0.
	HoverEvent int
	// WaitFor is a JavaScript expression that is true once the page has
	// drawn; empty waits for the load event and two frames.
	WaitFor string
	// Eval is a JavaScript expression evaluated (and awaited) after the
	// wait and before the hover and the screenshot; its JSON value is in
	// Result.Eval.
	Eval string
	// Timeout bounds the wait for the page; 0 means 30s.
	Timeout time.Duration
	// Viewport is the window size in CSS pixels, "WxH"; empty for 1280x800.
	Viewport string
}

// Result is what the harness saw. Times are ms since the navigation began,
// on the page's clock.
type Result struct {
	Target           string          `json:"target"`
	ConsoleErrors    []string        `json:"consoleErrors"`
	ConsoleWarnings  []string        `json:"consoleWarnings"`
	PageErrors       []string        `json:"pageErrors"`
	Dialogs          []string        `json:"dialogs"`
	FailedRequests   []string        `json:"failedRequests"`
	ExternalRequests []string        `json:"externalRequests"`
	Charts           Charts          `json:"charts"`
	Tooltip          string          `json:"tooltip"`
	HoverError       string          `json:"hoverError"`
	Eval             json.RawMessage `json:"eval"`
	EvalError        string          `json:"evalError"`
	WaitError        string          `json:"waitError"`
	LoadMs           float64         `json:"loadMs"`
	DrawMs           float64         `json:"drawMs"`
	Screenshot       string          `json:"screenshot"`
}

// Charts counts the page's elements with a data-chart attribute, and
// names (by id, else the attribute's value) those with nothing drawn in
// them.
type Charts struct {
	Total   int      `json:"total"`
	Drawn   int      `json:"drawn"`
	Missing []string `json:"missing"`
}

// Problems lists everything that is wrong on the page: errors, dialogs,
// external or failed requests, undrawn charts, a wait that timed out, a
// failed --eval or hover. An empty list means a clean page.
func (r Result) Problems() []string {
	var out []string
	add := func(what string, list []string) {
		for _, s := range list {
			out = append(out, what+": "+s)
		}
	}
	add("console error", r.ConsoleErrors)
	add("page error", r.PageErrors)
	add("dialog", r.Dialogs)
	add("external request", r.ExternalRequests)
	add("failed request", r.FailedRequests)
	add("chart not drawn", r.Charts.Missing)
	add("wait", nonEmpty(r.WaitError))
	add("eval", nonEmpty(r.EvalError))
	add("hover", nonEmpty(r.HoverError))
	return out
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// deps are the programs CheckPage runs.
type deps struct {
	node, harness, chromium string
}

// findDeps locates node, the harness (with playwright-core beside it) and
// Chromium, or says what is missing.
func findDeps() (deps, error) {
	var d deps
	var err error
	if d.node, err = exec.LookPath("node"); err != nil {
		return d, fmt.Errorf("node not found (make system-deps installs it)")
	}
	root, err := repoRoot()
	if err != nil {
		return d, err
	}
	d.harness = filepath.Join(root, "tools", "check-page.mjs")
	if _, err := os.Stat(filepath.Join(root, "node_modules", "playwright-core", "package.json")); err != nil {
		return d, fmt.Errorf("playwright-core is not installed in %s (make web-deps)", filepath.Join(root, "node_modules"))
	}
	d.chromium = os.Getenv("CHROMIUM")
	if d.chromium == "" {
		for _, c := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
			if p, err := exec.LookPath(c); err == nil {
				d.chromium = p
				break
			}
		}
	}
	if d.chromium == "" {
		return d, fmt.Errorf("chromium not found (make system-deps installs Debian's chromium; or set CHROMIUM)")
	}
	if _, err := os.Stat(d.chromium); err != nil {
		return d, fmt.Errorf("CHROMIUM=%s: %w", d.chromium, err)
	}
	return d, nil
}

// repoRoot is the repository's root, which holds tools/check-page.mjs
// and node_modules: two levels above this source file, or found upwards
// from the working directory.
func repoRoot() (string, error) {
	harness := filepath.Join("tools", "check-page.mjs")
	if _, file, _, ok := runtime.Caller(0); ok {
		dir := filepath.Dir(filepath.Dir(filepath.Dir(file)))
		if _, err := os.Stat(filepath.Join(dir, harness)); err == nil {
			return dir, nil
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, harness)); err == nil {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("%s not found above %s", harness, wd)
		}
	}
}

// CheckPage opens target (a URL, or an HTML file's path) in headless
// Chromium and returns what happened on it. It skips the test when node,
// playwright-core or Chromium is missing, or fails it when
// COMMPROF_REQUIRE_DEPS is set; it fails the test when the harness itself
// fails. What the page did wrong is in the result, for the test to judge
// (see Result.Problems).
func CheckPage(t testing.TB, target string, opt Options) Result {
	t.Helper()
	d, err := findDeps()
	if err != nil {
		if os.Getenv(envnames.RequireDeps) != "" {
			t.Fatalf("browser test: %v", err)
		}
		t.Skipf("browser test skipped: %v", err)
	}
	timeout := opt.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	if !regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]+:`).MatchString(target) {
		if target, err = filepath.Abs(target); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{d.harness, target, "--timeout", strconv.FormatInt(timeout.Milliseconds(), 10)}
	if opt.Screenshot != "" {
		args = append(args, "--screenshot", opt.Screenshot)
	}
	if opt.FullPage {
		args = append(args, "--full-page")
	}
	if opt.HoverEvent >= 0 {
		args = append(args, "--hover-event", strconv.Itoa(opt.HoverEvent))
	}
	if opt.WaitFor != "" {
		args = append(args, "--wait-for", opt.WaitFor)
	}
	if opt.Eval != "" {
		args = append(args, "--eval", opt.Eval)
	}
	if opt.Viewport != "" {
		args = append(args, "--viewport", opt.Viewport)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout+time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.node, args...)
	cmd.Env = append(os.Environ(), "CHROMIUM="+d.chromium)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("check-page %s: %v\n%s", target, err, stderr.Bytes())
	}
	var r Result
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("check-page %s: decoding its output: %v\n%s", target, err, stdout.Bytes())
	}
	return r
}

// ScreenshotDir is where tests write screenshots: $COMMPROF_SCREENSHOTS
// (created if need be) so that a person can look at them, else a
// temporary directory. Tests log the paths they write.
func ScreenshotDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv(envnames.Screenshots)
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("screenshot directory: %v", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}
