package pmpi

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/commprof/commprof/internal/envnames"
	"github.com/commprof/commprof/interpose/pmpi/internal/schemagen"
)

// TestSchemaUpToDate: c/schema.h is what the generator makes from the
// trace package's writer today (go generate ./interpose/pmpi).
func TestSchemaUpToDate(t *testing.T) {
	want, err := schemagen.Generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("c/schema.h")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("c/schema.h is out of date with the trace package's schema: run go generate ./interpose/pmpi")
	}
}

func TestDetectFlavor(t *testing.T) {
	for _, tc := range []struct {
		launcher string
		want     Flavor
	}{
		{"mpirun.openmpi", OpenMPI}, {"/usr/bin/orterun", OpenMPI}, {"mpirun.mpich", MPICH},
		{"mpiexec.hydra", MPICH}, {"mpiexec.mpich", MPICH},
	} {
		if got, err := DetectFlavor(context.Background(), tc.launcher); got != tc.want || err != nil {
			t.Errorf("DetectFlavor(%s) = %s, %v; want %s", tc.launcher, got, err, tc.want)
		}
	}
	// Debian's mpirun is a link, through /etc/alternatives, to one MPI's.
	if _, err := os.Stat("/usr/bin/mpirun"); err == nil {
		real, _ := filepath.EvalSymlinks("/usr/bin/mpirun")
		got, err := DetectFlavor(context.Background(), "mpirun")
		if want := launchers[filepath.Base(real)]; want != "" && (got != want || err != nil) {
			t.Errorf("DetectFlavor(mpirun -> %s) = %s, %v; want %s", real, got, err, want)
		}
	}
	for _, l := range []string{"srun", "./job.sh"} {
		if _, err := DetectFlavor(context.Background(), l); err == nil {
			t.Errorf("DetectFlavor(%s) found a flavor", l)
		}
	}
}

func TestPrepare(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "bin", "commprof")
	os.MkdirAll(filepath.Dir(exe), 0o755)
	for _, f := range Flavors {
		os.WriteFile(filepath.Join(filepath.Dir(exe), LibraryFile(f)), nil, 0o644)
	}
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	pass := []string{envnames.TraceDir, envnames.RunID}
	lib := func(f Flavor) string { return filepath.Join(filepath.Dir(exe), LibraryFile(f)) }
	for _, tc := range []struct {
		name     string
		args     []string
		flavor   Flavor
		env      []string
		wantArgs []string
		wantEnv  []string
		wantErr  string
	}{
		{name: "open mpi passes the variables on with -x", args: []string{"mpirun.openmpi", "-np", "2", "./a.out"},
			wantArgs: []string{"mpirun.openmpi", "-x", "LD_PRELOAD", "-x", envnames.TraceDir, "-x", envnames.RunID, "-np", "2", "./a.out"},
			wantEnv:  []string{"LD_PRELOAD=" + lib(OpenMPI)}},
		{name: "an existing LD_PRELOAD comes after the library", args: []string{"mpirun.mpich", "-n", "2", "a.out"},
			env: []string{"LD_PRELOAD", "/lib/x.so"}, wantArgs: []string{"mpirun.mpich", "-n", "2", "a.out"},
			wantEnv: []string{"LD_PRELOAD=" + lib(MPICH) + ":/lib/x.so"}},
		{name: "open mpi's env list is extended, not mixed with -x", args: []string{"mpirun.openmpi", "a.out"},
			env:      []string{"OMPI_MCA_mca_base_env_list", "FOO", envnames.Flush, "50ms"},
			wantArgs: []string{"mpirun.openmpi", "a.out"},
			wantEnv: []string{"LD_PRELOAD=" + lib(OpenMPI),
				"OMPI_MCA_mca_base_env_list=FOO;LD_PRELOAD;COMMPROF_TRACE_DIR;COMMPROF_RUN_ID;COMMPROF_FLUSH"}},
		{name: "--mpi overrides the launcher", args: []string{"mpirun.openmpi", "a.out"}, flavor: MPICH,
			wantArgs: []string{"mpirun.openmpi", "a.out"}, wantEnv: []string{"LD_PRELOAD=" + lib(MPICH)}},
		{name: "COMMPROF_MPI names the flavor", args: []string{"srun", "a.out"}, env: []string{envnames.MPI, "mpich"},
			wantArgs: []string{"srun", "a.out"}, wantEnv: []string{"LD_PRELOAD=" + lib(MPICH)}},
		{name: "srun with two libraries needs --mpi", args: []string{"srun", "a.out"}, wantErr: "--mpi openmpi or --mpi mpich"},
		{name: "a bad COMMPROF_MPI", args: []string{"mpirun.mpich", "a.out"}, env: []string{envnames.MPI, "lam"},
			wantErr: `COMMPROF_MPI: unknown MPI "lam"`},
		{name: "a missing COMMPROF_PMPI_LIB", args: []string{"mpirun.mpich", "a.out"},
			env: []string{envnames.PMPILibrary, "/nonexistent.so"}, wantErr: envnames.PMPILibrary},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Prepare(context.Background(), tc.args, PrepareOptions{Flavor: tc.flavor, Exe: exe, Getenv: env(tc.env...), Pass: pass})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.Args, tc.wantArgs) || !slices.Equal(p.Env, tc.wantEnv) {
				t.Errorf("args %q env %q\nwant args %q env %q", p.Args, p.Env, tc.wantArgs, tc.wantEnv)
			}
		})
	}
	// With one library only, it is the choice for a launcher that does not say.
	os.Remove(lib(MPICH))
	p, err := Prepare(context.Background(), []string{"srun", "a.out"}, PrepareOptions{Exe: exe, Getenv: env()})
	if err != nil || p.Flavor != OpenMPI {
		t.Errorf("one library: %+v, %v", p, err)
	}
	if _, err := Prepare(context.Background(), []string{"mpirun.mpich", "a.out"}, PrepareOptions{Exe: exe, Getenv: env()}); err == nil ||
		!strings.Contains(err.Error(), "make pmpi") {
		t.Errorf("a missing library: %v", err)
	}
}
