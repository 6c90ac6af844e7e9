package collectives

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/commprof/commprof/internal/envnames"
)

// launchers lists the rank and size variables of the launchers commprof
// recognises, in the order they are tried.
var launchers = []struct{ name, rank, size, localSize string }{
	{"commprof", envnames.Rank, envnames.Size, envnames.LocalSize},
	{"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"},
	{"pmi", "PMI_RANK", "PMI_SIZE", "MPI_LOCALNRANKS"},
	{"slurm", "SLURM_PROCID", "SLURM_NTASKS", ""},
	{"torchrun", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"},
}

// Job is how this process joins a job started by a launcher.
type Job struct {
	Launcher string // commprof, openmpi, pmi, slurm or torchrun
	// LocalSize is the number of ranks on this host, if the launcher says.
	LocalSize int
	// SecretFrom says where the job's secret came from: COMMPROF_SECRET,
	// the user's secret file (its path), or "" when there is none.
	SecretFrom string
	JoinConfig
}

// JobFromEnv reads the rank, the world size and how to find the
// coordinator from the environment. It returns ok == false when no
// launcher started this process. The coordinator is taken from
// COMMPROF_COORD, else MASTER_ADDR and MASTER_PORT, else a rendezvous file
// in COMMPROF_RENDEZVOUS_DIR; when every rank is on one host (the launcher
// says so) and none of those is set, the rendezvous directory defaults to
// the temporary directory, keyed by the launcher's job id.
func JobFromEnv(getenv func(string) string) (job Job, ok bool, err error) {
	for _, l := range launchers {
		rs, ss := getenv(l.rank), getenv(l.size)
		if rs == "" || ss == "" {
			continue
		}
		rank, err1 := strconv.Atoi(rs)
		size, err2 := strconv.Atoi(ss)
		if err1 != nil || err2 != nil || size < 1 || rank < 0 || rank >= size {
			return job, true, fmt.Errorf("%s launched this process with %s=%q and %s=%q: not a rank of a world", l.name, l.rank, rs, l.size, ss)
		}
		job = Job{Launcher: l.name, JoinConfig: JoinConfig{Rank: rank, Size: size, Secret: getenv(envnames.Secret), Advertise: getenv(envnames.Advertise)}}
		switch {
		case job.Secret != "":
			job.SecretFrom = envnames.Secret
		case size == 1:
			// No other rank to prove anything to.
		default:
			if job.Secret, job.SecretFrom, err = UserSecret(); err != nil {
				return job, true, fmt.Errorf("%s started this process as rank %d of %d without %s: %w", l.name, rank, size, envnames.Secret, err)
			}
		}
		if l.localSize != "" {
			job.LocalSize, _ = strconv.Atoi(getenv(l.localSize))
		}
		job.JobID = firstOf(getenv, envnames.JobID, "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE", "PMI_JOBID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID")
		if id := getenv("SLURM_STEP_ID"); id != "" && job.JobID == getenv("SLURM_JOB_ID") {
			job.JobID += "." + id
		}
		switch {
		case getenv(envnames.Coord) != "":
			job.Coord = getenv(envnames.Coord)
		case getenv("MASTER_ADDR") != "" && getenv("MASTER_PORT") != "":
			job.Coord = net.JoinHostPort(getenv("MASTER_ADDR"), getenv("MASTER_PORT"))
		case getenv(envnames.RendezvousDir) != "":
			job.RendezvousDir = getenv(envnames.RendezvousDir)
		case size == 1:
			job.Coord = "127.0.0.1:0"
		case l.localSize != "" && getenv(l.localSize) == ss && job.JobID != "":
			job.RendezvousDir = filepath.Join(os.TempDir(), "commprof-rendezvous")
			if err := os.MkdirAll(job.RendezvousDir, 0o777); err != nil {
				return job, true, fmt.Errorf("creating the rendezvous directory: %w", err)
			}
		default:
			return job, true, fmt.Errorf("%s started this process as rank %d of %d, but nothing says where rank 0 is: set %s=host:port (a port free on rank 0's host), MASTER_ADDR and MASTER_PORT, or %s to a directory every rank can read", l.name, rank, size, envnames.Coord, envnames.RendezvousDir)
		}
		if fd := getenv(envnames.CoordFD); fd != "" && rank == 0 {
			n, err := strconv.Atoi(fd)
			if err != nil || n < 3 {
				return job, true, fmt.Errorf("%s=%q is not an inherited file descriptor", envnames.CoordFD, fd)
			}
			ln, err := net.FileListener(os.NewFile(uintptr(n), "coordinator"))
			if err != nil {
				return job, true, fmt.Errorf("using the coordinator listener passed as fd %d: %w", n, err)
			}
			job.CoordListener = ln
		}
		if job.TCP.PeerTimeout, err = duration(getenv, envnames.PeerTimeout); err != nil {
			return job, true, err
		}
		if job.Timeout, err = duration(getenv, envnames.JoinTimeout); err != nil {
			return job, true, err
		}
		if job.TCP.RawIO, err = rawIO(getenv(envnames.RawIO), job.LocalSize, runtime.NumCPU()); err != nil {
			return job, true, err
		}
		if job.TCP.Congestion, err = congestionName(getenv(envnames.TCPCongestion)); err != nil {
			return job, true, err
		}
		if job.Transport, err = ParseTransportMode(getenv(envnames.Transport)); err != nil {
			return job, true, err
		}
		if job.Shm.Spin, err = shmSpin(getenv(envnames.ShmSpin)); err != nil {
			return job, true, err
		}
		return job, true, nil
	}
	return job, false, nil
}

func firstOf(getenv func(string) string, keys ...string) string {
	for _, k := range keys {
		if v := getenv(k); v != "" {
			return v
		}
	}
	return ""
}

func duration(getenv func(string) string, key string) (time.Duration, error) {
	v := getenv(key)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s=%q: want a duration such as 10s", key, v)
	}
	return d, nil
}

// shmSpin reads COMMPROF_SHM_SPIN: unset for the default
// (ShmConfig.Spin), 0 or off never to poll, else a duration.
func shmSpin(v string) (time.Duration, error) {
	switch strings.ToLower(v) {
	case "":
		return 0, nil
	case "0", "off", "never":
		return -1, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q: want a duration such as 50us, or off", envnames.ShmSpin, v)
	}
	if d == 0 {
		return -1, nil
	}
	return d, nil
}

// congestionName checks COMMPROF_TCP_CONGESTION: unset for commprof's
// choice, "system" for the host's default, or an algorithm's name, which
// the kernel checks when the connections are made.
func congestionName(v string) (string, error) {
	ok := len(v) < 16
	for _, r := range v {
		ok = ok && (r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-')
	}
	if !ok {
		return "", fmt.Errorf("%s=%q: want a TCP congestion control algorithm such as reno or cubic, or system", envnames.TCPCongestion, v)
	}
	return v, nil
}

// rawIO decides TCPConfig.RawIO from COMMPROF_RAW_IO: on, large or off as
// it says; by default on when this host's ranks outnumber its cores and
// large otherwise, which measured fastest in each case
// (docs/collectives.md).
func rawIO(v string, localSize, cores int) (RawIO, error) {
	switch v = strings.ToLower(v); v {
	case "":
		if localSize > cores {
			return RawOn, nil
		}
		return RawLarge, nil
	case "1", "true", "yes":
		return RawOn, nil
	case "0", "false", "no":
		return RawOff, nil
	}
	for m, name := range rawIONames {
		if v == name {
			return RawIO(m), nil
		}
	}
	return RawOff, fmt.Errorf("%s=%q: want on, large, off, or unset to decide by ranks per core", envnames.RawIO, v)
}

// UserSecret returns the user's own job secret: a random key in a file
// only the user can read ($XDG_CONFIG_HOME/commprof/secret, or
// ~/.config/commprof/secret), created on first use. Every rank of a job the
// user starts reads the same one through a shared home directory, and no
// other user can learn it. Without a home directory, or in a read-only
// one, there is no secret to share: it fails, saying how to give the
// job one (docs/launching.md), rather than leave the job open to anyone.
func UserSecret() (secret, path string, err error) {
	noFile := func(why error) error {
		return fmt.Errorf("no job secret: the per-user secret file cannot be made (%w); set %s to the same random value on every rank "+
			"(export %s=$(openssl rand -hex 32), passed on by the launcher: mpirun -x %s), or set XDG_CONFIG_HOME to a private directory every rank can write", why, envnames.Secret, envnames.Secret, envnames.Secret)
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", "", noFile(err)
	}
	dir = filepath.Join(dir, "commprof")
	path = filepath.Join(dir, "secret")
	if s, err := readSecretFile(path); err == nil {
		return s, path, nil
	} else if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", noFile(err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", "", fmt.Errorf("making a job secret: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "secret-*")
	if err != nil {
		return "", "", noFile(err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(hex.EncodeToString(key) + "\n")
	if err := errors.Join(werr, tmp.Chmod(0o600), tmp.Close()); err != nil {
		return "", "", fmt.Errorf("writing the job secret %s: %w", path, err)
	}
	// Link, not rename: when ranks on one host create it at once, the
	// first one's stays and everyone reads that.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", "", fmt.Errorf("writing the job secret %s: %w", path, err)
	}
	s, err := readSecretFile(path)
	return s, path, err
}

// readSecretFile reads a secret file, refusing one others could read.
func readSecretFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("the job secret %s can be read by others (mode %v): chmod 600 it, or set %s", path, st.Mode(), envnames.Secret)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading the job secret: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if len(s) < 32 {
		return "", fmt.Errorf("the job secret %s is too short (%d characters): remove it to have a new one made, or set %s", path, len(s), envnames.Secret)
	}
	return s, nil
}
