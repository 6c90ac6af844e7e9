// Package report owns every page commprof writes or serves and everything
// a page is made of: the text and CSV tables of `commprof stats`,
// `commprof diff` and `commprof sweep`; the self-contained HTML report of
// a run, of a diff and of a sweep; the list of runs, the live page and
// the error page of `commprof serve` (and their models, RunEntry and Live,
// built from what the server read); the timeline's page model (Timeline),
// built from a run's events; each figure's definition, which every card,
// column and figure row links to; and the templates, scripts, stylesheet
// and ECharts bundle in assets/, embedded so that a page is one file that
// opens with no network (docs/web.md).
//
// It computes no figure and gives no verdict: every number it shows, and
// whether a card is coloured good or bad, is a field of an
// analyze.Summary, Diff or Sweep, formatted by internal/units (and, in
// the pages' scripts, by assets/format.js). It reads runs only through
// load.
package report
