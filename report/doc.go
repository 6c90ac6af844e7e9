// Package report presents analyze.Summary values: the text and CSV tables
// of `commprof stats` and `commprof diff`, and the self-contained HTML
// report and diff report. It computes nothing itself; every number it
// shows is a field of a Summary or a Diff.
package report
