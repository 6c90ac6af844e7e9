package report

import (
	"fmt"
	"io"
	"net/http"
)

// Problem is what the error page of a request says: the HTTP status,
// a title (default: the status), the message as text, a link to home
// (the list of runs) and, optionally, links onwards (the runs of a sweep
// whose own page cannot be drawn).
type Problem struct {
	Code       int
	Title      string
	Message    string
	Home       string
	LinksTitle string
	Links      []Link
}

// Link is a link on a page: its text and URL.
type Link struct {
	Text, URL string
}

type errorPage struct {
	pageBase
	Problem
	Status      string
	CustomTitle bool
}

// WriteError writes the page of a request that failed with the HTTP
// status code: msg, shown as text, and a link to home, the list of runs.
func WriteError(w io.Writer, code int, msg, home string) error {
	return WriteProblem(w, Problem{Code: code, Message: msg, Home: home})
}

// WriteProblem writes the page of a request that failed as p says.
func WriteProblem(w io.Writer, p Problem) error {
	page := errorPage{pageBase: base(), Problem: p, Status: http.StatusText(p.Code), CustomTitle: p.Title != ""}
	if !page.CustomTitle {
		page.Title = fmt.Sprintf("%d %s", p.Code, page.Status)
	}
	return servePages.ExecuteTemplate(w, "error.html", page)
}
