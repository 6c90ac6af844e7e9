package rankrun

import (
	"errors"
	"testing"

	"github.com/commprof/commprof/internal/envnames"
)

func TestHere(t *testing.T) {
	for _, k := range []string{envnames.Rank, envnames.Size, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
		"PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "RANK", "WORLD_SIZE"} {
		t.Setenv(k, "")
	}
	if _, isRank, err := Here(4, false); isRank || err != nil {
		t.Errorf("no launcher: rank %v, %v", isRank, err)
	}
	var re RanksError
	if _, _, err := Here(0, true); !errors.As(err, &re) {
		t.Errorf("--ranks 0: %v", err)
	}
	t.Setenv("OMPI_COMM_WORLD_RANK", "2")
	t.Setenv("OMPI_COMM_WORLD_SIZE", "3")
	t.Setenv(envnames.Coord, "127.0.0.1:1")
	job, isRank, err := Here(4, false)
	if !isRank || err != nil || job.Rank != 2 || job.Size != 3 || job.Launcher != "openmpi" {
		t.Errorf("under mpirun: %+v %v %v", job, isRank, err)
	}
	if _, _, err := Here(4, true); !errors.As(err, &re) || err.Error() != "--ranks 4, but openmpi started 3 ranks" {
		t.Errorf("--ranks 4 under a 3-rank mpirun: %v", err)
	}
	t.Setenv("OMPI_COMM_WORLD_RANK", "3")
	if _, _, err := Here(3, false); err == nil || errors.As(err, &re) {
		t.Errorf("rank 3 of 3: %v", err)
	}
}

func TestKeepBatches(t *testing.T) {
	for v, want := range map[string]bool{"": false, "on": false, "off": true} {
		t.Setenv(envnames.Compact, v)
		if got, err := KeepBatches(); got != want || err != nil {
			t.Errorf("%s=%q: %v %v", envnames.Compact, v, got, err)
		}
	}
	t.Setenv(envnames.Compact, "maybe")
	if _, err := KeepBatches(); err == nil {
		t.Errorf("%s=maybe: no error", envnames.Compact)
	}
}
