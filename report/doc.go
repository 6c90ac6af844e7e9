// Package report owns every page commprof writes or serves and everything
// a page is made of: the text and CSV tables of `commprof stats` and
// `commprof diff`; the self-contained HTML report of a run and of a diff;
// the list of runs, the live page and the error page of `commprof serve`
// (and their data, RunInfo and Live); the timeline's page model
// (Timeline), built from a run's events; and the templates, scripts,
// stylesheet and ECharts bundle in assets/, embedded so that a page is
// one file that opens with no network (docs/web.md).
//
// It computes no figure: every number it shows is a field of an
// analyze.Summary or analyze.Diff, formatted by internal/units (and, in
// the pages' scripts, by assets/format.js). It reads runs only through
// load.
package report
