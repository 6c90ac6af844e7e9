package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
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
	} {
		r := commprof(t, nil, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d, want %d with %q\n%s", tc.args, r.code, tc.code, tc.want, r.stderr)
		}
	}
}
