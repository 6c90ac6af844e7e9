package pmpi

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/trace"
)

// TestDiskFull records into a 1.2 MB tmpfs that the ranks' streams fill
// while the program runs: the program runs on to MPI_Finalize, and
// run.json says that each rank stopped recording because no space was
// left, and that it reached MPI_Finalize, instead of blaming a missing
// MPI_Finalize; every stream keeps the events written before.
func TestDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	m := findMPI(t, MPICH)
	prog := cProgram(t, m, "stall")
	library(t, m)
	bin := commprofBin(t)
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1200k", "commprof-diskfull", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", mnt, err, out)
		}
	})
	dir := filepath.Join(mnt, "run")
	// 3,000 allreduces a rank, 10 µs of work apart: some 200 KiB of
	// events each, where record's reserve for run.json (1 MiB) leaves
	// under 200 KiB; flushed every 5 ms, so that the batches written
	// before the disk filled are kept.
	res := command(t, []string{envnames.Flush + "=5ms"}, "", bin, "record", "--out", dir, "--", "mpirun.mpich", "-np", "2", prog, "coll", "-1", "0", "1", "3000", "0.01")
	if res.err == nil {
		t.Fatalf("record succeeded on a full disk\n%s%s", res.stdout, res.stderr)
	}
	if !strings.Contains(res.stdout+res.stderr, "loop") {
		t.Errorf("the program did not run to its end\n%s%s", res.stdout, res.stderr)
	}
	m2, err := trace.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m2.Status != trace.StatusFailed || strings.Contains(m2.Error, "without MPI_Finalize") {
		t.Errorf("status %s, error %q", m2.Status, m2.Error)
	}
	stopped := 0
	for _, r := range []string{"rank 0", "rank 1"} {
		if strings.Contains(m2.Error, r+" stopped recording (writing its stream: no space left on device): it reached MPI_Finalize") {
			stopped++
		}
	}
	if stopped == 0 {
		t.Errorf("run.json's error does not say which rank ran out of space: %q", m2.Error)
	}
	if !strings.Contains(strings.ToLower(res.stderr), "no space left on device") {
		t.Errorf("record's output does not say the disk was full:\n%s", res.stderr)
	}
	// The streams keep what was written before, and the cause's files
	// are gone.
	run, err := trace.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, rk := range run.Ranks {
		if len(rk.Events) == 0 {
			t.Errorf("rank %d: no events kept", rk.Info.Rank)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".rank-*.why")); len(left) > 0 {
		t.Errorf("left in the run: %v", left)
	}
}
