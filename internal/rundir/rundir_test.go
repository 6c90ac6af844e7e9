package rundir

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/commprof/commprof/trace"
)

func touch(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestTake(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	d, err := Take(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	// A second recorder into the same directory is refused while the
	// first holds it, naming the holder.
	if _, err := Take(dir, true); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "process ") {
		t.Fatalf("second Take: %v", err)
	}
	if !Alive(dir) {
		t.Fatal("a taken directory is not alive")
	}
	touch(t, dir, trace.RankFile(0))
	touch(t, dir, trace.ManifestFile)
	d.Release()
	if Alive(dir) {
		t.Fatal("a released directory is alive")
	}
	if _, err := Take(dir, false); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("Take of a directory holding a run: %v", err)
	}
	d, err = Take(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, trace.RankFile(0))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("--force left the old stream: %v", err)
	}
	d.Release()
	noneLeft(t, dir)
	touch(t, dir, "notes.txt")
	if _, err := Take(dir, true); err == nil || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("Take of a directory with other files, forced: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal("--force removed a file that is not a run's")
	}
}

// TestAbandoned: a run whose recorder was killed says "running" in its
// run.json and is shown abandoned; the lock goes with the process.
func TestAbandoned(t *testing.T) {
	dir := t.TempDir()
	m := &trace.Manifest{FormatVersion: trace.FormatVersion, WorldSize: 1, Status: trace.StatusRunning}
	if err := Update(dir, func(*trace.Manifest) (*trace.Manifest, error) { return m, nil }); err != nil {
		t.Fatal(err)
	}
	// A child process takes the directory as a recorder does, says so,
	// and is killed.
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperRecorder$")
	cmd.Env = append(os.Environ(), "RUNDIR_HELPER="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "taken\n" {
		t.Fatalf("helper: %q %v", line, err)
	}
	if !Alive(dir) || Status(dir, m) != trace.StatusRunning {
		t.Fatalf("a recorded run: alive %v, status %s", Alive(dir), Status(dir, m))
	}
	if _, err := Take(dir, true); err == nil || !errors.Is(err, ErrBusy) {
		t.Fatalf("taking a run being recorded: %v", err)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if Alive(dir) || Status(dir, m) != trace.StatusAbandoned {
		t.Fatalf("a run whose recorder was killed: alive %v, status %s", Alive(dir), Status(dir, m))
	}
	// What the killed recorder left (its reserve of 1 MiB, its lock
	// files) stays until the next recording takes the directory.
	if _, err := os.Stat(filepath.Join(dir, reserveFile)); err != nil {
		t.Fatalf("the killed recorder's reserve: %v", err)
	}
	d, err := Take(dir, true)
	if err != nil {
		t.Fatalf("taking the run of a killed recorder: %v", err)
	}
	d.Release()
	noneLeft(t, dir)
}

// noneLeft fails if dir holds a file of the package's own.
func noneLeft(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".commprof-") || strings.Contains(e.Name(), ".tmp") {
			t.Errorf("left %s", e.Name())
		}
	}
}

// Release removes the lock file as it lets go: a process that opened it
// just before must not think it holds the directory. Many takers at once
// never hold it two at a time.
func TestTakeIsExclusive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	var holders, most, taken atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				d, err := Take(dir, true)
				if errors.Is(err, ErrBusy) {
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				n := holders.Add(1)
				for {
					m := most.Load()
					if n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				taken.Add(1)
				for range 20 { // hold it a while, for others to try
					runtime.Gosched()
				}
				holders.Add(-1)
				d.Release()
			}
		}()
	}
	wg.Wait()
	if most.Load() != 1 || taken.Load() == 0 {
		t.Fatalf("%d holders at once (%d takes)", most.Load(), taken.Load())
	}
	noneLeft(t, dir)
}

func TestBeginAndFinish(t *testing.T) {
	dir := t.TempDir()
	d, err := Take(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := Begin(dir, &trace.Manifest{Name: "r", WorldSize: 2}); err != nil {
		t.Fatal(err)
	}
	m, err := trace.ReadManifest(dir)
	if err != nil || m.Status != trace.StatusRunning || m.Start.IsZero() || !m.End.IsZero() || m.Name != "r" {
		t.Fatalf("begun: %v %+v", err, m)
	}
	err = Finish(dir, func(old *trace.Manifest) (*trace.Manifest, error) { return old, nil })
	if err == nil || !strings.Contains(err.Error(), `"running" is not a final one`) {
		t.Fatalf("finishing a run as running: %v", err)
	}
	if err := Finish(dir, func(old *trace.Manifest) (*trace.Manifest, error) {
		old.Status = trace.StatusComplete
		return old, nil
	}); err != nil {
		t.Fatalf("finishing a run as complete: %v", err)
	}
	if m, err = trace.ReadManifest(dir); err != nil || m.Status != trace.StatusComplete || m.End.Before(m.Start) || m.Name != "r" {
		t.Fatalf("finished: %v %+v", err, m)
	}
	d.Release()
	noneLeft(t, dir)
}

// On a full disk only the process that holds the directory may give up
// the space set aside: a rank 0 finishing under record (another process)
// fails, and record's own final write, the last, still succeeds.
func TestReserveIsTheHolders(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v %s", err, out)
	}
	defer exec.Command("umount", mnt).Run()
	dir := filepath.Join(mnt, "run")
	d, err := Take(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Release()
	if err := Begin(dir, &trace.Manifest{WorldSize: 1}); err != nil {
		t.Fatal(err)
	}
	// Fill the disk.
	f, err := os.Create(filepath.Join(dir, trace.RankFile(0)))
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := f.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	f.Close()
	final := func(from string) func(*trace.Manifest) (*trace.Manifest, error) {
		return func(*trace.Manifest) (*trace.Manifest, error) {
			return &trace.Manifest{WorldSize: 1, Status: trace.StatusFailed, Error: "disk full, said by " + from}, nil
		}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperFinisher$")
	cmd.Env = append(os.Environ(), "RUNDIR_HELPER="+dir)
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "no space left on device") {
		t.Fatalf("a rank 0 of another process finished on a full disk:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, reserveFile)); err != nil {
		t.Fatalf("the reserve went to another process: %v", err)
	}
	if err := Finish(dir, final("the holder")); err != nil {
		t.Fatalf("the holder's final write: %v", err)
	}
	if m, err := trace.ReadManifest(dir); err != nil || m.Error != "disk full, said by the holder" {
		t.Fatalf("%v %+v", err, m)
	}
}

// TestHelperFinisher is the child of TestReserveIsTheHolders: a process
// that does not hold the directory finishes its run.json.
func TestHelperFinisher(t *testing.T) {
	dir := os.Getenv("RUNDIR_HELPER")
	if dir == "" {
		t.Skip("run by TestReserveIsTheHolders")
	}
	err := Finish(dir, func(*trace.Manifest) (*trace.Manifest, error) {
		return &trace.Manifest{WorldSize: 1, Status: trace.StatusFailed, Error: "disk full, said by rank 0 " + strings.Repeat("x", 64<<10)}, nil
	})
	os.Stdout.WriteString(fmt.Sprintln(err))
}

// TestHelperRecorder is the child of TestAbandoned: it takes the
// directory and waits to be killed.
func TestHelperRecorder(t *testing.T) {
	dir := os.Getenv("RUNDIR_HELPER")
	if dir == "" {
		t.Skip("run by TestAbandoned")
	}
	if Claim(dir) == nil {
		t.Fatal("could not claim")
	}
	os.Stdout.WriteString("taken\n")
	// Held until killed. A timer keeps the runtime from taking a
	// process whose goroutines all wait on nothing for a deadlock.
	time.Sleep(time.Minute)
}

func TestUpdate(t *testing.T) {
	dir := t.TempDir()
	for i, want := range []string{trace.StatusRunning, trace.StatusComplete} {
		err := Update(dir, func(old *trace.Manifest) (*trace.Manifest, error) {
			if (old == nil) != (i == 0) {
				t.Errorf("update %d saw %+v", i, old)
			}
			return &trace.Manifest{FormatVersion: trace.FormatVersion, WorldSize: 1, Status: want}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		m, err := trace.ReadManifest(dir)
		if err != nil || m.Status != want {
			t.Fatalf("%v %+v", err, m)
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("left %s", e.Name())
		}
	}
}

// TestTakeReplacesAFailedEmptyRun: a run that failed before recording any
// event (its program refused a flag) is replaced without force, even with
// a stream of no events; one that failed after recording events, or
// finished, still needs force.
func TestTakeReplacesAFailedEmptyRun(t *testing.T) {
	stream := func(t *testing.T, dir string, events int) {
		t.Helper()
		f, err := os.Create(filepath.Join(dir, trace.RankFile(0)))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w, err := trace.NewWriter(f, trace.RankInfo{Rank: 0, WorldSize: 1}, trace.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range events {
			if err := w.Write([]trace.Event{{Rank: 0, Kind: trace.KindCompute, Name: "forward", Start: int64(i), Dur: 1, Peer: -1, Step: -1, Root: -1, Chunk: -1}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		status  string
		events  int // -1: no stream
		replace bool
	}{
		{"failed, no stream", trace.StatusFailed, -1, true},
		{"failed, a stream of no events", trace.StatusFailed, 0, true},
		{"interrupted, no stream", trace.StatusInterrupted, -1, true},
		{"failed after recording", trace.StatusFailed, 3, false},
		{"complete", trace.StatusComplete, 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			m := &trace.Manifest{FormatVersion: trace.FormatVersion, Name: "x", WorldSize: 1, Status: tc.status}
			if err := trace.WriteManifest(dir, m); err != nil {
				t.Fatal(err)
			}
			if tc.events >= 0 {
				stream(t, dir, tc.events)
			}
			d, err := Take(dir, false)
			if !tc.replace {
				if err == nil || !strings.Contains(err.Error(), "--force") {
					t.Fatalf("Take without force: %v, want a refusal naming --force", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Take without force: %v", err)
			}
			defer d.Release()
			if !d.ReplacedEmpty {
				t.Error("Take does not say it replaced the failed run")
			}
			for _, n := range []string{trace.ManifestFile, trace.RankFile(0)} {
				if _, err := os.Stat(filepath.Join(dir, n)); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the failed run's %s is still there: %v", n, err)
				}
			}
		})
	}
}
