package report

import _ "embed"

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

// timelineJS defines the global CommprofTimeline (docs/web.md).
//
//go:embed assets/timeline.js
var timelineJS string

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
