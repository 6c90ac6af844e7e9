package report

import (
	_ "embed"
	"strings"
)

// What every page is made of, embedded so that a page is one file that
// opens with no network (docs/web.md). None of the scripts contains
// "</script" and the stylesheet no "</style" (a test checks), so they are
// inlined as they are.

// echartsJS is Apache ECharts, echarts.min.js as its pinned npm package
// ships it (assets/echarts/README.md): a UMD bundle that defines the
// global echarts.
//
//go:embed assets/echarts/echarts.min.js
var echartsJS string

// formatJS defines the global CommprofFormat, the formatters of every
// page's scripts; pages inline it before them.
//
//go:embed assets/format.js
var formatJS string

//go:embed assets/timeline-data.js
var timelineDataJS string

//go:embed assets/timeline-view.js
var timelineViewJS string

//go:embed assets/timeline-widget.js
var timelineWidgetJS string

//go:embed assets/timeline-draw.js
var timelineDrawJS string

//go:embed assets/timeline-detail.js
var timelineDetailJS string

//go:embed assets/timeline-interact.js
var timelineInteractJS string

//go:embed assets/timeline.js
var timelineMountJS string

// timelineParts are the scripts of the timeline, in the order a page runs
// them: each defines its part of the global CommprofTimelineParts for the
// ones after it, and the last, timeline.js, the global CommprofTimeline
// (docs/web.md).
var timelineParts = []script{
	{"timeline-data.js", timelineDataJS},         // checks and indexes the data
	{"timeline-view.js", timelineViewJS},         // the span shown, the layout, where things are
	{"timeline-widget.js", timelineWidgetJS},     // the elements and the legend
	{"timeline-draw.js", timelineDrawJS},         // a frame and the overlay
	{"timeline-detail.js", timelineDetailJS},     // fetching a span's events
	{"timeline-interact.js", timelineInteractJS}, // hit testing, tooltip, pinning, input
	{"timeline.js", timelineMountJS},             // mount
}

// timelineJS is the timeline's parts joined in order, the one script that
// every page with a timeline inlines.
var timelineJS = joinScripts(timelineParts)

// script is an embedded script and its file's name in assets/.
type script struct{ name, js string }

// joinScripts joins scripts into one, each starting on a line of its own.
func joinScripts(parts []script) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.js)
		if !strings.HasSuffix(p.js, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// reportJS draws a report's charts and mounts its timeline.
//
//go:embed assets/report.js
var reportJS string

// reportCSSText is the stylesheet of every page, the timeline's included.
//
//go:embed assets/report.css
var reportCSSText string

//go:embed assets/page.html
var pageHTML string
