package pmpi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/commprof/commprof/internal/envnames"
)

// Flavor is an MPI implementation family: programs built against one
// need the library built against it.
type Flavor string

// Flavors the library is built for. MPICH's covers the implementations
// that keep its ABI (Intel MPI, MVAPICH, Cray MPICH).
const (
	OpenMPI Flavor = "openmpi"
	MPICH   Flavor = "mpich"
)

// Flavors lists the flavors, in the order they are tried.
var Flavors = []Flavor{OpenMPI, MPICH}

// ParseFlavor checks a flavor name.
func ParseFlavor(s string) (Flavor, error) {
	switch f := Flavor(strings.ToLower(s)); f {
	case OpenMPI, MPICH:
		return f, nil
	case "open-mpi", "ompi":
		return OpenMPI, nil
	case "intel", "intelmpi", "mvapich", "mvapich2":
		return MPICH, nil
	}
	return "", fmt.Errorf("unknown MPI %q (want openmpi or mpich)", s)
}

// LibraryFile returns the file name of the library built for f.
func LibraryFile(f Flavor) string { return "libcommprof-pmpi-" + string(f) + ".so" }

// FindLibrary returns the library for f: $COMMPROF_PMPI_LIB if set, else
// the first of LibraryFile(f) beside the commprof binary exe and in
// ../lib/commprof from it.
func FindLibrary(f Flavor, exe string, getenv func(string) string) (string, error) {
	if p := getenv(envnames.PMPILibrary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s: %w", envnames.PMPILibrary, err)
		}
		return filepath.Abs(p)
	}
	dir := filepath.Dir(exe)
	tried := []string{filepath.Join(dir, LibraryFile(f)), filepath.Join(dir, "..", "lib", "commprof", LibraryFile(f))}
	for _, p := range tried {
		if _, err := os.Stat(p); err == nil {
			return filepath.Abs(p)
		}
	}
	return "", fmt.Errorf("no PMPI library for %s: looked for %s; build it with `make pmpi` (which needs %s's compiler wrapper) or name it in %s",
		f, strings.Join(tried, " and "), f, envnames.PMPILibrary)
}

// launchers maps launcher names, as typed or as their links resolve, to
// their flavor; srun and unknown launchers are not here.
var launchers = map[string]Flavor{
	"mpirun.openmpi": OpenMPI, "mpiexec.openmpi": OpenMPI, "orterun": OpenMPI, "prterun": OpenMPI,
	"prun": OpenMPI, "oshrun": OpenMPI,
	"mpirun.mpich": MPICH, "mpiexec.mpich": MPICH, "mpiexec.hydra": MPICH, "hydra_nameserver": MPICH,
	"mpirun.hydra": MPICH,
}

// DetectFlavor says which MPI the launcher belongs to: from its name, the
// name its links resolve to, or what `mpirun --version` prints. It returns an error naming the launcher when it cannot tell
// (srun, a wrapper script): the caller then asks the user.
func DetectFlavor(ctx context.Context, launcher string) (Flavor, error) {
	if f, ok := launchers[filepath.Base(launcher)]; ok {
		return f, nil
	}
	path, err := exec.LookPath(launcher)
	if err != nil {
		return "", fmt.Errorf("finding %s: %w", launcher, err)
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		if f, ok := launchers[filepath.Base(real)]; ok {
			return f, nil
		}
	}
	// Ask only what is named like an MPI launcher: any other program
	// (srun, a job script) would run with --version as its argument.
	if b := filepath.Base(launcher); !strings.HasPrefix(b, "mpirun") && !strings.HasPrefix(b, "mpiexec") {
		return "", fmt.Errorf("%s is not a launcher commprof knows (mpirun, mpiexec)", launcher)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, path, "--version")
	c.Env = append(os.Environ(), "LD_PRELOAD=")
	out, _ := c.CombinedOutput()
	v := string(out)
	switch {
	case strings.Contains(v, "Open MPI") || strings.Contains(v, "OpenRTE") || strings.Contains(v, "PRRTE"):
		return OpenMPI, nil
	case strings.Contains(v, "HYDRA") || strings.Contains(v, "MPICH") || strings.Contains(v, "Intel(R) MPI"):
		return MPICH, nil
	}
	first, _, _ := strings.Cut(strings.TrimSpace(v), "\n")
	return "", fmt.Errorf("cannot tell which MPI %s belongs to (%s --version says %q)", launcher, launcher, first)
}

// Plan is how a launcher's command line is recorded.
type Plan struct {
	Flavor  Flavor
	Library string   // the library the ranks preload
	Args    []string // the launcher's command line, with what it needs to pass the variables on
	Env     []string // variables to add to the launcher's environment
}

// ErrNoFlavor is returned by Prepare when the MPI cannot be told.
var ErrNoFlavor = errors.New("cannot tell which MPI the program uses")

// PrepareOptions configure Prepare.
type PrepareOptions struct {
	Flavor Flavor // the user's choice; empty: detect
	Exe    string // the commprof binary, beside which the libraries lie
	Getenv func(string) string
	// Pass names the variables (set in the launcher's environment) the
	// ranks need besides the library's: the run's directory, id, name.
	Pass []string
}

// Prepare plans the recording of args, a launcher's command line
// (mpirun -np 4 ./prog ...): the flavor, the library, LD_PRELOAD for the
// launcher's environment (local ranks inherit it) and, for Open MPI's
// mpirun, the variables passed on to ranks on other hosts (Open MPI
// passes only those it is told of; MPICH's hydra and srun pass the whole
// environment).
func Prepare(ctx context.Context, args []string, o PrepareOptions) (*Plan, error) {
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	f := o.Flavor
	if f == "" {
		if v := o.Getenv(envnames.MPI); v != "" {
			var err error
			if f, err = ParseFlavor(v); err != nil {
				return nil, fmt.Errorf("%s: %w", envnames.MPI, err)
			}
		}
	}
	if f == "" {
		var derr error
		f, derr = DetectFlavor(ctx, args[0])
		if derr != nil {
			// One library built: it is the only choice.
			var have []Flavor
			for _, g := range Flavors {
				if _, err := FindLibrary(g, o.Exe, o.Getenv); err == nil {
					have = append(have, g)
				}
			}
			if len(have) != 1 || o.Getenv(envnames.PMPILibrary) != "" {
				return nil, fmt.Errorf("%w: %v; say which with --mpi openmpi or --mpi mpich", ErrNoFlavor, derr)
			}
			f = have[0]
		}
	}
	lib, err := FindLibrary(f, o.Exe, o.Getenv)
	if err != nil {
		return nil, err
	}
	p := &Plan{Flavor: f, Library: lib, Args: args}
	preload := lib
	if old := o.Getenv("LD_PRELOAD"); old != "" {
		preload += ":" + old
	}
	p.Env = append(p.Env, "LD_PRELOAD="+preload)
	if f == OpenMPI {
		pass := append([]string{"LD_PRELOAD"}, o.Pass...)
		for _, v := range []string{envnames.Flush, envnames.Clock, envnames.JoinTimeout} {
			if o.Getenv(v) != "" {
				pass = append(pass, v)
			}
		}
		// Open MPI refuses -x together with mca_base_env_list: extend
		// the list when the user set it, else add -x options.
		if list := o.Getenv("OMPI_MCA_mca_base_env_list"); list != "" {
			p.Env = append(p.Env, "OMPI_MCA_mca_base_env_list="+list+";"+strings.Join(pass, ";"))
		} else {
			a := []string{args[0]}
			for _, v := range pass {
				a = append(a, "-x", v)
			}
			p.Args = append(a, args[1:]...)
		}
	}
	return p, nil
}
