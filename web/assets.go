// Package web holds the report's front-end assets; its subpackage serve is
// the HTTP server of `commprof serve`, and webtest drives headless
// Chromium over pages in tests.
//
// The assets are embedded in the binary, so that a report is one HTML file
// that works offline: ECharts, copied from web/node_modules into web/dist/ by
// `make web`, and the hand-written timeline and stylesheet in web/src/, which
// need no build step. docs/web.md describes the timeline's data format.
package web

import (
	"embed"
	"errors"
	"io/fs"
)

// dist holds what `make web` built; a committed README keeps the pattern
// matching before anything is built.
//
//go:embed dist
var dist embed.FS

//go:embed src/timeline.js
var timelineJS string

//go:embed src/report.css
var reportCSS string

// ErrNotBuilt is what ECharts returns when the binary was built without
// the JavaScript that `make web` produces.
var ErrNotBuilt = errors.New("the report's JavaScript is not built into this binary: run `make web` (or `make build`) and rebuild")

// ECharts returns the minified ECharts library (echarts.min.js, a UMD
// bundle that defines the global `echarts`), or ErrNotBuilt when the
// binary was built before `make web`. The slice is the caller's own.
func ECharts() ([]byte, error) {
	b, err := dist.ReadFile("dist/echarts.min.js")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotBuilt
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

// TimelineJS returns timeline.js, which defines the global
// CommprofTimeline (see docs/web.md). It contains no "</script", so it can
// be inlined in a <script> element. The slice is the caller's own.
func TimelineJS() []byte { return []byte(timelineJS) }

// ReportCSS returns the report stylesheet, report.css, including the
// timeline's styles. It contains no "</style", so it can be inlined in a
// <style> element. The slice is the caller's own.
func ReportCSS() []byte { return []byte(reportCSS) }
