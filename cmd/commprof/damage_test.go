package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/commprof/commprof/trace/damage"
)

// Limits every command that reads a damaged run works under: its address
// space (ulimit -v, KiB), the peak RSS it may reach, and the time it may
// take. The runs are a few KiB: a command near these limits sized
// something by a value read from a file.
const (
	damageMemLimitKB = 4 << 20 // 4 GiB of address space
	damageRSSLimitKB = 1 << 20 // 1 GiB resident
	damageTimeLimit  = 30 * time.Second
)

// limited starts commprof args under the memory limit.
func limited(ctx context.Context, args ...string) *exec.Cmd {
	sh := exec.CommandContext(ctx, "sh", "-c", `ulimit -v `+strconv.Itoa(damageMemLimitKB)+` && exec "$@"`, "sh", bin)
	sh.Args = append(sh.Args, args...)
	sh.Env = cleanEnv()
	return sh
}

// crashed reports whether a command's stderr shows a Go panic or fatal
// error rather than an error of commprof's own.
func crashed(stderr string) bool {
	return strings.Contains(stderr, "panic") || strings.Contains(stderr, "fatal error") || strings.Contains(stderr, "goroutine ")
}

// TestDamagedRuns puts every reading command through a corpus of damaged
// run directories (internal/damage: cut and corrupted streams, values a
// run cannot hold, broken or hostile run.json files, FIFOs, links and
// stray files) under a memory limit and a time limit. Each must end by
// itself as the case says: read cleanly, read with a warning that names
// the file and what is wrong, or refused with an error that does; never
// a panic, a hang or an out-of-memory death. serve must answer for every
// one of them under the same limits.
func TestDamagedRuns(t *testing.T) {
	base := t.TempDir()
	corpus := filepath.Join(base, "corpus")
	cases, err := damage.Corpus(corpus, 1)
	if err != nil {
		t.Fatal(err)
	}
	good := cases[0].Dir
	type command struct {
		args  []string
		reads damage.Readers // AllReaders: prints no warnings
		// declines is what the command says when a run it reads holds
		// too little for it (a model fit needs several message sizes).
		declines string
	}
	cmds := []command{
		{[]string{"stats", "{}"}, damage.SummaryReaders, ""},
		{[]string{"stats", "{}", "--format", "json"}, damage.SummaryReaders, ""},
		{[]string{"report", "{}", "-o", "{out}.html"}, damage.SummaryReaders, ""},
		{[]string{"dump", "{}", "--limit", "50"}, damage.EventReaders, ""},
		{[]string{"export", "{}", "--format", "perfetto", "-o", "{out}.json"}, damage.EventReaders, ""},
		{[]string{"export", "{}", "--format", "pprof", "-o", "{out}.pb.gz"}, damage.EventReaders, ""},
		{[]string{"export", "{}", "--format", "csv", "-o", "{out}.csv"}, damage.EventReaders, ""},
		{[]string{"diff", good, "{}"}, damage.SummaryReaders, ""},
		{[]string{"predict", "{}", "--ranks", "8"}, damage.SummaryReaders, "commprof: no projection: "},
		{[]string{"bench", "read", "{}", "--repeat", "1"}, damage.AllReaders, ""},
	}
	worst := int64(0)
	for i, c := range cases {
		for j, cc := range cmds {
			cmd := cc.args
			args := make([]string, len(cmd))
			for k, a := range cmd {
				a = strings.ReplaceAll(a, "{}", c.Dir)
				args[k] = strings.ReplaceAll(a, "{out}", filepath.Join(base, "out-"+strconv.Itoa(i)+"-"+strconv.Itoa(j)))
			}
			what := fmt.Sprintf("%s (%v): commprof %s", c.Name, c.Want, strings.Join(cmd, " "))
			ctx, cancel := context.WithTimeout(context.Background(), damageTimeLimit)
			sh := limited(ctx, args...)
			var stderr bytes.Buffer
			sh.Stderr = &stderr
			err := sh.Run()
			timedOut := ctx.Err() != nil
			cancel()
			if timedOut {
				t.Errorf("%s: did not end in %v", what, damageTimeLimit)
				continue
			}
			if ru, ok := sh.ProcessState.SysUsage().(*syscall.Rusage); ok {
				worst = max(worst, ru.Maxrss)
			}
			code, msg := sh.ProcessState.ExitCode(), stderr.String()
			if code > 1 || code < 0 || crashed(msg) {
				t.Errorf("%s: exit %d (%v)\n%s", what, code, err, msg)
				continue
			}
			if code == 1 && !strings.HasPrefix(msg, "commprof: ") {
				t.Errorf("%s: failed without saying why:\n%s", what, msg)
			}
			if cc.declines != "" && c.Want != damage.Refused && code == 1 && strings.Contains(msg, cc.declines) {
				code, msg = 0, strings.ReplaceAll(msg, cc.declines, "")
			}
			switch {
			case c.SeenBy != damage.AllReaders && c.SeenBy != cc.reads:
				// The damage is where this command does not look.
				if code != 0 {
					t.Errorf("%s: exit %d, want the run read:\n%s", what, code, msg)
				}
			default:
				checkOutcome(t, what, c, cc.reads == damage.AllReaders, code, msg)
			}
		}
	}
	t.Logf("%d damaged runs × %d commands; the largest peak RSS was %d KiB", len(cases), len(cmds), worst)
	if worst > damageRSSLimitKB {
		t.Errorf("a command used %d KiB on a damaged run of a few KiB", worst)
	}
	t.Run("serve", func(t *testing.T) { serveDamaged(t, corpus, cases) })
}

// checkOutcome checks a command's exit and messages against what the case
// wants. quiet is for a command that prints no warnings (bench read).
func checkOutcome(t *testing.T, what string, c damage.Case, quiet bool, code int, stderr string) {
	t.Helper()
	var warnings []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "commprof: warning: ") {
			warnings = append(warnings, l)
		}
	}
	says := func(text string) bool {
		for _, s := range c.Says {
			if !strings.Contains(text, s) {
				return false
			}
		}
		return true
	}
	switch c.Want {
	case damage.Refused:
		if code != 1 || !says(stderr) {
			t.Errorf("%s: exit %d, want 1 with an error that says %q:\n%s", what, code, c.Says, stderr)
		}
		return
	case damage.Clean, damage.Warned, damage.Survives:
		if code != 0 {
			t.Errorf("%s: exit %d, want the run read:\n%s", what, code, stderr)
			return
		}
	}
	switch c.Want {
	case damage.Clean:
		if len(warnings) > 0 {
			t.Errorf("%s: warnings about a run with nothing wrong:\n%s", what, stderr)
		}
	case damage.Warned:
		if !quiet && !says(strings.Join(warnings, "\n")) {
			t.Errorf("%s: no warning says %q:\n%s", what, c.Says, stderr)
		}
	case damage.Survives:
		for _, w := range warnings {
			if !says(w) {
				t.Errorf("%s: a warning that does not say %q: %s", what, c.Says, w)
			}
		}
	}
}

// serveDamaged serves the corpus under the same limits and asks for the
// list, then every run's page, stats.json and timeline.json: readable
// runs are answered, refused ones get an error page naming the problem,
// and serve survives it all.
func serveDamaged(t *testing.T, corpus string, cases []damage.Case) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sh := limited(ctx, "serve", "--addr", "127.0.0.1:0", corpus)
	out, err := sh.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	sh.Stderr = &stderr
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sh.Process.Kill() }()
	lines := make(chan string, 1)
	go func() {
		br := bufio.NewReader(out)
		l, _ := br.ReadString('\n')
		lines <- l
		_, _ = io.Copy(io.Discard, br)
	}()
	var base string
	select {
	case l := <-lines:
		_, u, ok := strings.Cut(strings.TrimSpace(l), " at ")
		if !ok {
			t.Fatalf("serve printed %q\n%s", l, stderr.String())
		}
		base = strings.TrimSuffix(u, "/")
	case <-time.After(damageTimeLimit):
		t.Fatalf("serve printed no URL in %v\n%s", damageTimeLimit, stderr.String())
	}
	c := &http.Client{Timeout: damageTimeLimit, Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	get := func(path string) (int, []byte) {
		t.Helper()
		res, err := c.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v (serve died or hung?)\n%s", path, err, stderr.String())
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return res.StatusCode, b
	}

	// The list reads every run; a run it had no time for yet is pending.
	type entry struct {
		Name, Error, Report, Stats string
		Pending                    bool
	}
	byName := map[string]entry{}
	for deadline := time.Now().Add(2 * time.Minute); ; {
		code, body := get("/api/runs")
		var list struct{ Runs []entry }
		if code != 200 || json.Unmarshal(body, &list) != nil {
			t.Fatalf("/api/runs: %d\n%.2000s", code, body)
		}
		pending := 0
		for _, e := range list.Runs {
			byName[e.Name] = e
			if e.Pending {
				pending++
			}
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/api/runs: %d runs still pending", pending)
		}
		time.Sleep(100 * time.Millisecond) // polling the list until it has read every run
	}
	for _, cs := range cases {
		name := filepath.Base(cs.Dir)
		what := fmt.Sprintf("serve, %s (%v)", cs.Name, cs.Want)
		e, listed := byName[name]
		if !listed {
			t.Errorf("%s: not in /api/runs", what)
			continue
		}
		page, pageBody := get("/runs/" + name + "/")
		stats, statsBody := get("/runs/" + name + "/stats.json")
		tl, tlBody := get("/runs/" + name + "/timeline.json?from=0&to=9223372036854775807")
		if cs.Want == damage.Refused {
			if e.Error == "" {
				t.Errorf("%s: the list shows no error", what)
			}
			for _, r := range []struct {
				path string
				code int
				body []byte
			}{{"page", page, pageBody}, {"stats.json", stats, statsBody}, {"timeline.json", tl, tlBody}} {
				if r.code < 400 || r.code == http.StatusServiceUnavailable || !bytes.Contains(r.body, []byte(cs.Says[len(cs.Says)-1])) {
					t.Errorf("%s: %s: %d, want an error that says %q\n%.500s", what, r.path, r.code, cs.Says[len(cs.Says)-1], r.body)
				}
			}
			continue
		}
		if e.Error != "" {
			t.Errorf("%s: the list says %q", what, e.Error)
		}
		if page != 200 || !bytes.Contains(pageBody, []byte(`id="summary-data"`)) {
			t.Errorf("%s: the page: %d\n%.500s", what, page, pageBody)
		}
		if stats != 200 || !json.Valid(statsBody) {
			t.Errorf("%s: stats.json: %d\n%.500s", what, stats, statsBody)
		}
		if tl != 200 || !json.Valid(tlBody) {
			t.Errorf("%s: timeline.json: %d\n%.500s", what, tl, tlBody)
		}
	}
	if err := sh.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	code, _ := waitExit(t, sh, damageTimeLimit)
	if code != exitOK && code != exitInterrupted || crashed(stderr.String()) {
		t.Errorf("serve: exit %d\n%s", code, stderr.String())
	}
	if ru, ok := sh.ProcessState.SysUsage().(*syscall.Rusage); ok {
		t.Logf("serve's peak RSS: %d KiB", ru.Maxrss)
		if ru.Maxrss > damageRSSLimitKB {
			t.Errorf("serve used %d KiB over a corpus of a few KiB runs", ru.Maxrss)
		}
	}
}
