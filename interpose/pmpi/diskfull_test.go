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
	// events each uncompressed (--codec none), where record's reserve for
	// run.json (1 MiB) leaves under 200 KiB; flushed every 5 ms, so that
	// the batches written before the disk filled are kept.
	res := command(t, []string{envnames.Flush + "=5ms"}, "", bin, "record", "--codec", "none", "--out", dir, "--", "mpirun.mpich", "-np", "2", prog, "coll", "-1", "0", "1", "3000", "0.01")
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

// TestStreamCompressedAsWritten: the library compresses its batches as it
// writes them, so that a stream left as written (no compaction: a run
// that did not end well, or COMMPROF_COMPACT=off) takes a few bytes an
// event, not the 83 of raw columns; record --codec none writes them
// raw. Both hold the same calls.
func TestStreamCompressedAsWritten(t *testing.T) {
	m := findMPI(t, MPICH)
	prog := cProgram(t, m, "stall")
	library(t, m)
	bin := commprofBin(t)
	perEvent := map[string]float64{}
	for _, codec := range []string{"zstd", "none"} {
		dir := filepath.Join(t.TempDir(), codec)
		res := command(t, []string{envnames.Compact + "=off"}, "", bin, "record", "--codec", codec, "--out", dir, "--",
			"mpirun.mpich", "-np", "2", prog, "coll", "-1", "0", "0", "20000", "0")
		if res.err != nil {
			t.Fatalf("%s: record: %v\n%s%s", codec, res.err, res.stdout, res.stderr)
		}
		run := readRun(t, dir)
		if len(run.Ranks) != 2 || len(run.Problems) != 0 || run.Manifest.Codec != trace.Codec(codec) {
			t.Fatalf("%s: %d ranks, problems %v, codec %s", codec, len(run.Ranks), run.Problems, run.Manifest.Codec)
		}
		var events, bytes int64
		for _, rk := range run.Ranks {
			n := 0
			for _, e := range rk.Events {
				if e.Kind == trace.KindCollective && e.Name == "allreduce" {
					n++
				}
			}
			if n < 20000 {
				t.Errorf("%s: rank %d recorded %d allreduces, want the loop's 20,000 and more", codec, rk.Info.Rank, n)
			}
			events += int64(len(rk.Events))
			bytes += rk.Bytes
		}
		perEvent[codec] = float64(bytes) / float64(events)
	}
	if perEvent["zstd"] > 12 || perEvent["none"] < 60 {
		t.Errorf("as written: %.1f bytes an event compressed, %.1f raw; want at most 12 and at least 60", perEvent["zstd"], perEvent["none"])
	}
	t.Logf("as written: %.1f bytes an event compressed, %.1f raw", perEvent["zstd"], perEvent["none"])
}
