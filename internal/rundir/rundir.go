// Package rundir owns a run directory's lifecycle and its run.json: a
// recording takes the directory (so two recordings never share one); every
// write of run.json goes through Begin, Update or Finish (one writer, under
// a lock, whose final write can be made even on a full disk); readers learn
// from Status whether a run that says it is running still has a recorder;
// what a killed recorder left behind stays until the next Take.
//
// The writers (a rank 0 session, record, the PMPI finisher, the importers)
// keep only their own data: what goes into the manifest. The format
// version, the times a run starts and ends, the lock and the space set
// aside for the last write are this package's.
package rundir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/commprof/commprof/trace"
)

// Files the package keeps in a run directory, beside the streams and
// run.json, while a run is recorded; Release removes them, and the next
// Take those a killed recorder left. Readers ignore them.
const (
	lockFile     = ".commprof-recording" // held exclusively while the run is recorded; holds the holder's pid
	manifestLock = ".commprof-manifest"  // held while run.json is rewritten
	reserveFile  = ".commprof-reserve"   // space kept so that the final run.json can be written on a full disk
	reserveBytes = 1 << 20
)

// ErrBusy is returned by Take for a directory another process records.
var ErrBusy = errors.New("run directory is being recorded")

// Dir is a run directory taken for a recording.
type Dir struct {
	Path string
	// ReplacedEmpty says that Take replaced, without force, a run that
	// had failed or been interrupted before recording any event.
	ReplacedEmpty bool
	lock          *os.File
}

// lock opens path (creating it) and locks it with flock(how). The file
// is removed by the holder as it lets go, so a lock taken on a file that
// is no longer at path (opened just before its removal) locks nothing:
// it is dropped and taken again on the file now there.
func lock(path string, how int) (*os.File, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), how); err != nil {
			f.Close()
			return nil, err
		}
		held, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		now, err := os.Stat(path)
		if err == nil && os.SameFile(held, now) {
			return f, nil
		}
		f.Close()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
}

// Take creates dir, or takes an existing one that holds no run, and locks
// it for this process until Release. With force, a previous run's files
// (streams, run.json, report) are removed first, as they are without it
// when that run failed before recording any event; files that are not a
// run's are never removed, and a directory another process is recording
// is never taken. It also sets aside space for the final run.json, which
// only this process's Finish may use.
func Take(dir string, force bool) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the run directory: %w", err)
	}
	lk, err := lock(filepath.Join(dir, lockFile), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		b, _ := os.ReadFile(filepath.Join(dir, lockFile))
		who := strings.TrimSpace(string(b))
		if who == "" {
			who = "another process"
		} else {
			who = "process " + who
		}
		return nil, fmt.Errorf("%w: %s records into %s now; choose another --out", ErrBusy, who, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("locking the run directory %s: %w", dir, err)
	}
	d := &Dir{Path: dir, lock: lk}
	ents, err := os.ReadDir(dir)
	if err != nil {
		d.Release()
		return nil, fmt.Errorf("reading the run directory: %w", err)
	}
	var runFiles, others []string
	for _, e := range ents {
		switch n := e.Name(); {
		case n == lockFile || n == manifestLock || n == reserveFile:
		case ownFile(n):
			runFiles = append(runFiles, n)
		default:
			others = append(others, n)
		}
	}
	switch {
	case len(others) > 0:
		d.Release()
		return nil, fmt.Errorf("run directory %s holds files that are not a run's (%s); choose another --out", dir, strings.Join(first(others, 3), ", "))
	case len(runFiles) > 0 && !force && failedEmpty(dir, runFiles):
		// A run that failed before recording anything (a mistyped flag
		// of the program) holds nothing to lose: the corrected command
		// takes its place.
		d.ReplacedEmpty = true
	case len(runFiles) > 0 && !force:
		d.Release()
		return nil, fmt.Errorf("run directory %s already holds a run; choose another --out, or --force to replace it", dir)
	}
	for _, n := range runFiles {
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			d.Release()
			return nil, fmt.Errorf("replacing the run in %s: %w", dir, err)
		}
	}
	d.hold()
	return d, nil
}

// hold writes this process's pid into the lock file (Finish tells the
// holder by it) and sets the reserve aside.
func (d *Dir) hold() {
	if err := d.lock.Truncate(0); err == nil {
		_, _ = d.lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	// Ignore failure: a disk already full has no room to keep.
	_ = os.WriteFile(filepath.Join(d.Path, reserveFile), make([]byte, reserveBytes), 0o644)
}

// failedEmpty reports whether dir, holding runFiles, holds a run that failed or was
// interrupted before any rank recorded an event: its run.json says so, and
// no stream holds a whole event (a stream cut before its first batch
// holds none). Anything it cannot read makes it a run to keep.
func failedEmpty(dir string, runFiles []string) bool {
	m, err := trace.ReadManifest(dir)
	if err != nil || (m.Status != trace.StatusFailed && m.Status != trace.StatusInterrupted) {
		return false
	}
	streams := 0
	for _, n := range runFiles {
		if strings.HasPrefix(n, "rank-") {
			streams++
		}
	}
	if streams == 0 {
		return true
	}
	rf, err := trace.OpenRun(dir)
	if err != nil || len(rf.Streams) != streams {
		return false // a stream it would not read may hold events
	}
	for i, st := range rf.Streams {
		if st.Bytes == 0 {
			continue
		}
		n := 0
		err := rf.ScanStream(i, []string{trace.ColKind}, func(_ trace.RankInfo, b *trace.Batch) error { n += b.Len; return nil })
		var te *trace.TruncatedError
		if n > 0 || (err != nil && !errors.As(err, &te)) {
			return false
		}
	}
	return true
}

// ownFile reports whether a file is one a run consists of.
func ownFile(name string) bool {
	switch {
	case name == trace.ManifestFile, name == ReportFile, strings.HasPrefix(name, trace.ManifestFile+".tmp"):
		return true
	case strings.HasPrefix(name, "rank-") && (strings.HasSuffix(name, ".arrows") || strings.Contains(name, ".arrows.")):
		return true
	}
	return false
}

func first(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "...")
	}
	return s
}

// Release gives the directory up: the recording is over. The reserve and
// the lock files go with it.
func (d *Dir) Release() {
	if d == nil || d.lock == nil {
		return
	}
	os.Remove(filepath.Join(d.Path, reserveFile))
	os.Remove(filepath.Join(d.Path, manifestLock))
	// Removed while held: a process that opened it before sees, once it
	// has the lock, that it locked a removed file (see lock).
	os.Remove(filepath.Join(d.Path, lockFile))
	d.lock.Close() // closing drops the flock
	d.lock = nil
}

// Claim is Take for a rank that records a run no recorder took (ranks a
// launcher started with COMMPROF_TRACE_DIR set by hand): it locks the
// directory if no one holds it, so that readers see the run alive and its
// Finish may use the reserve, and does nothing (returns nil) if a
// recorder already holds it.
func Claim(dir string) *Dir {
	lk, err := lock(filepath.Join(dir, lockFile), syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		return nil
	}
	d := &Dir{Path: dir, lock: lk}
	d.hold()
	return d
}

// Alive reports whether a process still records into dir: the recording
// lock is held. A run whose run.json says "running" but is not alive was
// abandoned (its recorder was killed).
func Alive(dir string) bool {
	f, err := os.Open(filepath.Join(dir, lockFile))
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// holds reports whether this process holds dir (Take or Claim): the lock
// is held and names this process.
func holds(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, lockFile))
	return err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(os.Getpid()) && Alive(dir)
}

// Status is the status readers should show for a run: run.json's, or
// "abandoned" for a run that says it is running with no recorder alive.
func Status(dir string, m *trace.Manifest) string {
	if m == nil {
		return ""
	}
	if m.Status == trace.StatusRunning && !Alive(dir) {
		return trace.StatusAbandoned
	}
	return m.Status
}

// Begin writes the run.json of a run that starts: m with status running
// and the time it started (now, unless m says).
func Begin(dir string, m *trace.Manifest) error {
	m.Status = trace.StatusRunning
	if m.Start.IsZero() {
		m.Start = time.Now()
	}
	return update(dir, false, func(*trace.Manifest) (*trace.Manifest, error) { return m, nil })
}

// Update rewrites run.json under the directory's manifest lock: f gets
// the manifest as it is (nil if there is none, or it cannot be read) and
// returns the one to write, or nil to write nothing. The write is atomic
// (a temporary file renamed, and removed whatever happens).
func Update(dir string, f func(m *trace.Manifest) (*trace.Manifest, error)) error {
	return update(dir, false, f)
}

// Finish writes a run's final run.json, as Update does: f's manifest
// must have a final status (complete, failed or interrupted), and gets the
// time the run ended unless it has one. When the disk is full, the space
// Take set aside is given up for the write, but only by the process that
// holds the directory (record, an import, or a rank 0 that claimed it),
// whose write is the last: a rank 0 finishing under record cannot use up
// what record's own final write needs.
func Finish(dir string, f func(m *trace.Manifest) (*trace.Manifest, error)) error {
	return update(dir, holds(dir), func(old *trace.Manifest) (*trace.Manifest, error) {
		m, err := f(old)
		if err != nil || m == nil {
			return m, err
		}
		switch m.Status {
		case trace.StatusComplete, trace.StatusFailed, trace.StatusInterrupted:
		default:
			return nil, fmt.Errorf("finishing %s: status %q is not a final one", filepath.Join(dir, trace.ManifestFile), m.Status)
		}
		if m.End.IsZero() {
			m.End = time.Now()
		}
		return m, nil
	})
}

func update(dir string, reserve bool, f func(m *trace.Manifest) (*trace.Manifest, error)) error {
	path := filepath.Join(dir, trace.ManifestFile)
	lk, err := lock(filepath.Join(dir, manifestLock), syscall.LOCK_EX)
	if err != nil {
		return fmt.Errorf("locking %s: %w", path, err)
	}
	defer lk.Close()
	old, err := trace.ReadManifest(dir)
	if err != nil {
		old = nil // none yet, or a damaged one: replaced, not kept
	}
	m, err := f(old)
	if err != nil || m == nil {
		return err
	}
	m.FormatVersion = trace.FormatVersion
	err = trace.WriteManifest(dir, m)
	if errors.Is(err, syscall.ENOSPC) && reserve {
		if rerr := os.Remove(filepath.Join(dir, reserveFile)); rerr == nil {
			err = trace.WriteManifest(dir, m)
		}
	}
	return err
}

// Discard gives the directory up and removes it if the recording left
// nothing in it (a launcher whose program was never recorded).
func (d *Dir) Discard() {
	path := d.Path
	d.Release()
	os.Remove(path) // only if empty
}
