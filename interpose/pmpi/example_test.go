package pmpi

import (
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/commprof/commprof/trace"
)

// TestExampleTrainer records examples/mpi4py/train.py, the data-parallel
// trainer a user writes with mpi4py, on 2 ranks for one short epoch: the
// initial parameters broadcast once, each step's two gradient buckets
// allreduced without blocking and waited for, the epoch's figures
// allreduced, and the model learning.
func TestExampleTrainer(t *testing.T) {
	m := findMPI(t, OpenMPI)
	py := python(t)
	library(t, m)
	bin := commprofBin(t)
	dir := filepath.Join(t.TempDir(), "run")
	script, _ := filepath.Abs("../../examples/mpi4py/train.py")
	res := command(t, nil, "", bin, "record", "--out", dir, "--", "mpirun", "--allow-run-as-root", "--oversubscribe",
		"-np", "2", py, script, "--synthetic-size", "1200", "--epochs", "1", "--batch-size", "32", "--bucket-mb", "0.1")
	if res.err != nil {
		t.Fatalf("record: %v\n%s%s", res.err, res.stdout, res.stderr)
	}
	acc := regexp.MustCompile(`test acc ([0-9.]+)`).FindStringSubmatch(res.stdout)
	if acc == nil {
		t.Fatalf("no test accuracy in the output:\n%s", res.stdout)
	}
	if a, _ := strconv.ParseFloat(acc[1], 64); a < 0.5 {
		t.Errorf("test accuracy %v after an epoch, want at least 0.5 (chance is 0.1)", a)
	}
	run := readRun(t, dir)
	const params = 784*256 + 256 + 256*128 + 128 + 128*10 + 10
	// Buckets from the last layer: layers 3 and 2 (over 0.1 MiB), then layer 1.
	top, bottom := int64(4*(params-(784*256+256))), int64(4*(784*256+256))
	const steps = 1200 / (32 * 2)
	for _, rk := range run.Ranks {
		var bcast, waits, epochSums int
		buckets := map[int64]int{}
		for _, e := range rk.Events {
			switch {
			case e.Kind == trace.KindCollective && e.Name == "broadcast":
				bcast++
				if e.Bytes != 4*params || e.Root != 0 || e.Seq != 0 || e.DType != "float32" {
					t.Errorf("rank %d: the parameters' broadcast is %+v", rk.Info.Rank, e)
				}
			case e.Kind == trace.KindCollective && e.Name == "allreduce" && e.DType == "float32":
				buckets[e.Bytes]++
			case e.Kind == trace.KindCollective && e.Name == "allreduce" && e.DType == "float64":
				epochSums++
			case e.Kind == trace.KindWait && e.Name == "allreduce":
				waits++
			}
		}
		if bcast != 1 || buckets[top] != steps || buckets[bottom] != steps || len(buckets) != 2 || waits != 2*steps || epochSums != 2 {
			t.Errorf("rank %d: %d broadcasts, buckets %v (want %d of %d and of %d bytes), %d waits, %d epoch allreduces",
				rk.Info.Rank, bcast, buckets, steps, top, bottom, waits, epochSums)
		}
	}
	checkSpans(t, run)
}
