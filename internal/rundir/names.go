package rundir

import (
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// The files commands write in a run's directory (beside the streams and
// run.json, trace.ManifestFile) and in a sweep's.
const (
	ReportFile    = "report.html" // `commprof report`'s page, beside the run's streams
	SweepFile     = "sweep.json"  // `commprof sweep`'s summary of its runs, in the sweep's directory
	SweepPageFile = "sweep.html"  // `commprof sweep`'s page, beside sweep.json
)

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// SafeName makes s fit for a run's name and a directory's: every run of
// characters other than letters, digits, '.', '_' and '-' becomes one
// '-', and the result has no '-' or '.' at either end (so it is never
// "." or ".."). It may be "".
func SafeName(s string) string {
	return strings.Trim(unsafeName.ReplaceAllString(s, "-"), "-.")
}

// DefaultDir is where a run named name, started at started, goes when
// the user names no directory: runs/NAME-YYYYMMDD-HHMMSS under the working
// directory.
func DefaultDir(name string, started time.Time) string {
	return filepath.Join("runs", name+"-"+started.Format("20060102-150405"))
}

// NewID returns a run ID: the run's name and 12 random hex digits, so that
// two runs of one name (recorded or imported) are told apart.
func NewID(name string) string {
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	return name + "-" + hex.EncodeToString(id)
}
