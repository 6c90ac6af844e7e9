package report

import (
	"embed"
	"html/template"
)

// The pages of `commprof serve` besides the reports: the list of runs,
// the live page of a run being recorded, and the error page. Their data
// (RunEntry, Live) is also what the server answers as JSON.

//go:embed assets/index.html assets/live.html assets/error.html assets/style.html
var templateFiles embed.FS

//go:embed assets/live.js
var liveJS string

//go:embed assets/index.js
var indexJS string

var servePages = template.Must(template.New("serve").Funcs(template.FuncMap{
	// choicesFor is the diff form's select of runs, with one selected.
	"choicesFor": func(groups []choiceGroup, selected string) any {
		return struct {
			Groups   []choiceGroup
			Selected string
		}{groups, selected}
	},
}).ParseFS(templateFiles, "assets/index.html", "assets/live.html", "assets/error.html", "assets/style.html"))

// pageBase is what every page's template needs.
type pageBase struct {
	CSS template.CSS
}

func base() pageBase { return pageBase{CSS: template.CSS(reportCSSText)} }
