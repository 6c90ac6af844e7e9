package rundir

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

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
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if Alive(dir) || Status(dir, m) != trace.StatusAbandoned {
		t.Fatalf("a run whose recorder was killed: alive %v, status %s", Alive(dir), Status(dir, m))
	}
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
	select {}
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
