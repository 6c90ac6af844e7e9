package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNaNLossRun: a training run whose loss goes NaN (a learning rate of
// a million) is common in real work. It is recorded as complete with its
// final figures, the NaN kept (null in JSON, NaN in text), and every
// reader shows it: stats, stats --format json, report, and serve's page,
// stats.json and list.
func TestNaNLossRun(t *testing.T) {
	runs := t.TempDir()
	dir := filepath.Join(runs, "nan")
	rec := commprof(t, nil, "record", "--ranks", "2", "--out", dir, "--", "train", "--epochs", "1", "--lr", "1e6", "--synthetic-size", "2000")
	if rec.code != 0 {
		t.Fatalf("record: exit %d\n%s", rec.code, rec.stderr)
	}
	if !strings.Contains(rec.stdout, "loss NaN") {
		t.Fatalf("the run's loss did not go NaN; nothing to test:\n%s", rec.stdout)
	}
	type metrics struct {
		Status  string              `json:"status"`
		Metrics map[string]*float64 `json:"metrics"`
	}
	nanKept := func(what string, m metrics) {
		t.Helper()
		loss, ok := m.Metrics["loss"]
		if !ok || loss != nil || m.Metrics["test_accuracy"] == nil || m.Status != "complete" {
			t.Errorf("%s: status %q, metrics %v: want complete, loss null beside the other figures", what, m.Status, m.Metrics)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var manifest metrics
	if err := json.Unmarshal(b, &manifest); err != nil {
		t.Fatalf("run.json: %v\n%s", err, b)
	}
	nanKept("run.json", manifest)

	if r := commprof(t, nil, "stats", dir); r.code != 0 {
		t.Errorf("stats: exit %d\n%s", r.code, r.stderr)
	}
	js := commprof(t, nil, "stats", dir, "--format", "json")
	var sum struct{ Run metrics }
	if js.code != 0 || json.Unmarshal([]byte(js.stdout), &sum) != nil {
		t.Fatalf("stats --format json: exit %d\n%s%.500s", js.code, js.stderr, js.stdout)
	}
	nanKept("stats --format json", sum.Run)

	html := filepath.Join(t.TempDir(), "nan.html")
	if r := commprof(t, nil, "report", dir, "-o", html); r.code != 0 {
		t.Fatalf("report: exit %d\n%s", r.code, r.stderr)
	}
	page, err := os.ReadFile(html)
	if err != nil || !bytes.Contains(page, []byte(`"loss":null`)) {
		t.Errorf("the report's summary does not hold the NaN loss as null (%v)", err)
	}

	cmd, u, stderr := startServe(t, "--addr", "127.0.0.1:0", runs)
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	base := u.Scheme + "://" + u.Host
	if code, page := fetchURL(t, c, base+"/runs/nan/"); code != 200 || !bytes.Contains(page, []byte(`id="summary-data"`)) {
		t.Errorf("serve, the run's page: %d\n%.500s", code, page)
	}
	code, got := fetchURL(t, c, base+"/runs/nan/stats.json")
	if code != 200 {
		t.Errorf("serve, stats.json: %d\n%.500s", code, got)
	} else if err := sameJSON(got, []byte(js.stdout)); err != nil {
		t.Errorf("serve's stats.json is not what stats --format json prints: %v", err)
	}
	code, got = fetchURL(t, c, base+"/api/runs")
	var list struct {
		Runs []struct{ Name, Status, Error string }
	}
	if code != 200 || json.Unmarshal(got, &list) != nil || len(list.Runs) != 1 || list.Runs[0].Status != "complete" || list.Runs[0].Error != "" {
		t.Errorf("serve, /api/runs: %d\n%s", code, got)
	}
	stopServe(t, cmd, stderr)
}
