package webtest_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/commprof/commprof/internal/webtest"
)

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestBadPage checks that the harness reports what a broken page does.
func TestBadPage(t *testing.T) {
	page := writeFile(t, "bad.html", `<!doctype html>
<html><head><meta charset="utf-8"><title>bad</title>
<link rel="stylesheet" href="https://cdn.example.com/style.css"></head>
<body>
<div id="empty" data-chart></div>
<div data-chart="drawn"><svg width="50" height="50"><rect width="40" height="40"/></svg></div>
<img src="missing.png">
<script>
console.error('something broke');
console.warn('something is odd');
alert('hello');
fetch('http://example.com/track').catch(() => {});
setTimeout(() => { window.drawn = true; }, 50);
null.f();
</script>
</body></html>
`)
	r := webtest.CheckPage(t, page, webtest.Options{HoverEvent: -1, WaitFor: "window.drawn === true"})
	has := func(list []string, sub string) bool {
		return slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, sub) })
	}
	if !has(r.ConsoleErrors, "something broke") || !has(r.ConsoleWarnings, "something is odd") {
		t.Errorf("console errors %q, warnings %q", r.ConsoleErrors, r.ConsoleWarnings)
	}
	if !has(r.PageErrors, "null") {
		t.Errorf("page errors %q", r.PageErrors)
	}
	if !has(r.Dialogs, "alert: hello") {
		t.Errorf("dialogs %q", r.Dialogs)
	}
	if !has(r.ExternalRequests, "https://cdn.example.com/style.css") || !has(r.ExternalRequests, "http://example.com/track") {
		t.Errorf("external requests %q", r.ExternalRequests)
	}
	if !has(r.FailedRequests, "missing.png") {
		t.Errorf("failed requests %q", r.FailedRequests)
	}
	if r.Charts.Total != 2 || r.Charts.Drawn != 1 || !slices.Equal(r.Charts.Missing, []string{"empty"}) {
		t.Errorf("charts %+v", r.Charts)
	}
	if r.WaitError != "" || r.DrawMs < 50 {
		t.Errorf("wait error %q, drawn at %v ms", r.WaitError, r.DrawMs)
	}
	if len(r.Problems()) < 7 {
		t.Errorf("problems: %q", r.Problems())
	}
}

// TestWaitTimeout checks that a page that never draws is the page's
// problem, not the harness's.
func TestWaitTimeout(t *testing.T) {
	page := writeFile(t, "never.html", `<!doctype html><title>never</title><p>nothing</p>`)
	r := webtest.CheckPage(t, page, webtest.Options{HoverEvent: 3, WaitFor: "window.never", Timeout: 500 * time.Millisecond})
	if !strings.Contains(r.WaitError, "window.never") {
		t.Errorf("wait error %q", r.WaitError)
	}
	if !strings.Contains(r.HoverError, "no timeline") {
		t.Errorf("hover error %q", r.HoverError)
	}
}

// TestEChartsPage draws a chart with the ECharts that reports embed, as a
// report does, and checks that the harness sees it drawn.
func TestEChartsPage(t *testing.T) {
	// The report's own ECharts and stylesheet, as the repository holds them.
	js, err := os.ReadFile("../../report/assets/echarts/echarts.min.js")
	if err != nil {
		t.Fatal(err)
	}
	css, err := os.ReadFile("../../report/assets/report.css")
	if err != nil {
		t.Fatal(err)
	}
	page := writeFile(t, "chart.html", `<!doctype html>
<html><head><meta charset="utf-8"><title>chart</title><style>`+string(css)+`</style></head>
<body><main><section class="cp-section"><h2>Bandwidth</h2>
<div id="bw" class="cp-chart" data-chart></div></section></main>
<script>`+string(js)+`</script>
<script>
const chart = echarts.init(document.getElementById('bw'), null, { renderer: 'canvas' });
chart.setOption({
  animation: false,
  xAxis: { type: 'category', data: ['8 B', '1 KiB', '64 KiB', '1 MiB', '16 MiB'] },
  yAxis: { type: 'value', name: 'GB/s' },
  series: [{ type: 'bar', data: [0.01, 0.8, 4.1, 9.3, 10.2] }],
});
window.chartDrawn = true;
</script></body></html>
`)
	shot := filepath.Join(webtest.ScreenshotDir(t), "echarts.png")
	r := webtest.CheckPage(t, page, webtest.Options{HoverEvent: -1, WaitFor: "window.chartDrawn", Screenshot: shot})
	for _, p := range r.Problems() {
		t.Error(p)
	}
	if r.Charts.Total != 1 || r.Charts.Drawn != 1 {
		t.Errorf("charts %+v", r.Charts)
	}
	t.Logf("screenshot: %s", shot)
}
