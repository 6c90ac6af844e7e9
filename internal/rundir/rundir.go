// Package rundir owns a run directory's lifecycle: a recording takes the
// directory (so two recordings never share one), every write of run.json
// goes through Update (one writer, under a lock, always able to finish
// even on a full disk), and readers learn from Alive whether a run that
// says it is running still has a recorder.
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

	"github.com/commprof/commprof/trace"
)

// Files the package keeps in a run directory, beside the streams and
// run.json. Readers ignore them.
const (
	lockFile     = ".commprof-recording" // held exclusively while the run is recorded; holds the holder's pid
	manifestLock = ".commprof-manifest"  // held while run.json is rewritten
	reserveFile  = ".commprof-reserve"   // space kept so the final run.json can be written on a full disk
	reserveBytes = 1 << 20
)

// ErrBusy is returned by Take for a directory another process records.
var ErrBusy = errors.New("run directory is being recorded")

// Dir is a run directory taken for a recording.
type Dir struct {
	Path string
	lock *os.File
}

// Take creates dir, or takes an existing one that holds no run, and locks
// it for this process until Release. With force, a previous run's files
// (streams, run.json, report) are removed first; files that are not a
// run's are never removed, and a directory another process is recording
// is never taken. It also sets aside space for the final run.json.
func Take(dir string, force bool) (*Dir, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating the run directory: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("locking the run directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(lock.Name())
		lock.Close()
		who := strings.TrimSpace(string(b))
		if who == "" {
			who = "another process"
		} else {
			who = "process " + who
		}
		return nil, fmt.Errorf("%w: %s records into %s now; choose another --out", ErrBusy, who, dir)
	}
	d := &Dir{Path: dir, lock: lock}
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
	if err := lock.Truncate(0); err == nil {
		_, _ = lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	// Ignore failure: a disk already full has no room to keep.
	_ = os.WriteFile(filepath.Join(dir, reserveFile), make([]byte, reserveBytes), 0o644)
	return d, nil
}

// ownFile reports whether a file is one a run consists of.
func ownFile(name string) bool {
	switch {
	case name == trace.ManifestFile, name == "report.html", strings.HasPrefix(name, trace.ManifestFile+".tmp"):
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

// Release gives the directory up: the recording is over.
func (d *Dir) Release() {
	if d.lock == nil {
		return
	}
	os.Remove(filepath.Join(d.Path, reserveFile))
	_ = d.lock.Truncate(0)
	d.lock.Close() // closing drops the flock
	d.lock = nil
}

// Claim is Take for a rank that records a run no recorder took (ranks a
// launcher started with COMMPROF_TRACE_DIR set by hand): it locks the
// directory if no one holds it, so that readers see the run alive, and
// does nothing (returns nil) if a recorder already holds it.
func Claim(dir string) *Dir {
	lock, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil
	}
	_ = os.WriteFile(filepath.Join(dir, reserveFile), make([]byte, reserveBytes), 0o644)
	return &Dir{Path: dir, lock: lock}
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

// Update rewrites run.json under the directory's manifest lock: f gets
// the manifest as it is (nil if there is none) and returns the one to
// write. The write is atomic (a temporary file renamed); if the disk is
// full, the space Take set aside is given up for it, and the temporary
// file is removed whatever happens.
func Update(dir string, f func(m *trace.Manifest) (*trace.Manifest, error)) error {
	lock, err := os.OpenFile(filepath.Join(dir, manifestLock), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("locking %s: %w", filepath.Join(dir, trace.ManifestFile), err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", filepath.Join(dir, trace.ManifestFile), err)
	}
	old, err := trace.ReadManifest(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			old = nil // a damaged run.json is replaced, not kept
		} else {
			old = nil
		}
	}
	m, err := f(old)
	if err != nil || m == nil {
		return err
	}
	err = trace.WriteManifest(dir, m)
	if errors.Is(err, syscall.ENOSPC) {
		if rerr := os.Remove(filepath.Join(dir, reserveFile)); rerr == nil {
			err = trace.WriteManifest(dir, m)
		}
	}
	return err
}

// Discard gives the directory up and removes it if the recording left
// nothing in it (a launcher whose program was never recorded): its own
// files go, and then the directory if it is empty.
func (d *Dir) Discard() {
	path := d.Path
	d.Release()
	for _, n := range []string{lockFile, manifestLock, reserveFile} {
		os.Remove(filepath.Join(path, n))
	}
	os.Remove(path) // only if empty
}
