// Package export writes a run in other tools' formats: Chrome trace-event
// JSON for the Perfetto UI and chrome://tracing (Perfetto), a pprof profile
// of where communication time and bytes go (PProf), and one CSV row per
// event for spreadsheets and data frames (CSV).
//
// Each writer takes a whole run as read by load.All and streams its
// output to an io.Writer: nothing the size of the output is built in
// memory, but the run's events are, and the Perfetto writer keeps a few
// bytes per event beside them. The writers only read the run and may be
// called on one run from several goroutines. docs/export.md describes the
// formats as a user sees them.
package export
