// Package torch records PyTorch distributed jobs (torch.distributed, DDP)
// with no change to the user's script: `commprof record` writes the
// Python startup package embedded here into a directory it puts first on
// PYTHONPATH (Startup, Env), every rank spools what it records there
// (py/commprof_torch.py), and once the job has exited Finish turns the
// spools into the run's Arrow streams and manifest (docs/torch.md).
package torch

import (
	"embed"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/commprof/commprof/trace"
)

//go:embed py/sitecustomize.py py/commprof_torch.py
var pyFiles embed.FS

// Variables the startup module reads besides the recording's own
// (internal/envnames): the rendezvous address the local ranks get as
// MASTER_ADDR and MASTER_PORT when nothing else set them.
const (
	EnvMasterAddr = "COMMPROF_TORCH_MASTER_ADDR"
	EnvMasterPort = "COMMPROF_TORCH_MASTER_PORT"
)

// SpoolFile is the name of rank r's spool in the run directory. It is
// named as the run's own (rank-NNNNN.arrows.*), so a directory a killed
// recording left behind can be replaced, and no stream reader takes it for
// a stream.
func SpoolFile(r int) string { return trace.RankFile(r) + ".spool" }

// Startup writes the startup package into a new directory under parent
// ("" for the system's temporary directory) and returns it; the caller
// removes it when the job has exited.
func Startup(parent string) (string, error) {
	dir, err := os.MkdirTemp(parent, "commprof-python-")
	if err != nil {
		return "", fmt.Errorf("writing commprof's Python startup package: %w", err)
	}
	ents, _ := pyFiles.ReadDir("py")
	for _, e := range ents {
		b, err := pyFiles.ReadFile("py/" + e.Name())
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
		}
		if err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("writing commprof's Python startup package: %w", err)
		}
	}
	return dir, nil
}

// Env returns the variables that have the Python processes a job starts
// load the startup package in pydir: PYTHONPATH with pydir first and, with
// local set, the rendezvous address of a free local port for MASTER_ADDR
// and MASTER_PORT (the startup module uses it only where they are unset).
func Env(pydir string, local bool, getenv func(string) string) ([]string, error) {
	path := pydir
	if old := getenv("PYTHONPATH"); old != "" {
		path += string(os.PathListSeparator) + old
	}
	env := []string{"PYTHONPATH=" + path}
	if local {
		port, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("finding a free port for the ranks' rendezvous: %w", err)
		}
		env = append(env, EnvMasterAddr+"=127.0.0.1", EnvMasterPort+"="+strconv.Itoa(port))
	}
	return env, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// IsPython reports whether argv runs a Python program directly
// (python3 train.py, python -m pkg), which record starts as local ranks.
func IsPython(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	b := filepath.Base(argv[0])
	return strings.HasPrefix(b, "python") || strings.HasPrefix(b, "pypy")
}

// IsTorchLauncher reports whether argv is one of PyTorch's own launchers
// (torchrun, python -m torch.distributed.run or .launch), which start the
// ranks themselves.
func IsTorchLauncher(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	if filepath.Base(argv[0]) == "torchrun" {
		return true
	}
	if !IsPython(argv) {
		return false
	}
	for i := 1; i+1 < len(argv); i++ {
		if argv[i] == "-m" {
			m := argv[i+1]
			return m == "torch.distributed.run" || m == "torch.distributed.launch"
		}
		if !strings.HasPrefix(argv[i], "-") {
			return false
		}
	}
	return false
}

// LaunchesPython reports whether a launcher's command line (mpirun -np 2
// python3 train.py) starts a Python program.
func LaunchesPython(argv []string) bool {
	for _, a := range argv[1:] {
		if IsPython([]string{a}) {
			return true
		}
	}
	return false
}
