// Package envnames names every COMMPROF_* environment variable: those
// through which `commprof record` has a program's ranks record themselves
// (commprof's own ranks, rankrun; the ranks of a user's MPI
// program through the PMPI library, interpose/pmpi, whose C side,
// interpose/pmpi/c, reads the same names; the launchers that must pass
// them on), those through which ranks find each other (collectives), the
// faults a job carries (inject), and the test suite's own switches. It
// imports nothing, so that every layer spells them from here, and only
// here.
package envnames

// The recording's variables.
const (
	// TraceDir is the run directory: ranks record only when it is set.
	TraceDir = "COMMPROF_TRACE_DIR"
	RunID    = "COMMPROF_RUN_ID"
	RunName  = "COMMPROF_RUN_NAME"
	// Codec is the stream compression commprof's own ranks write with;
	// the PMPI library writes zstd unless it is none.
	Codec = "COMMPROF_CODEC"
	// Command is the recorded command line, as a JSON array.
	Command = "COMMPROF_COMMAND"
	// Flush is the longest time an event waits before it is written
	// (a duration; default 1s).
	Flush = "COMMPROF_FLUSH"
	// Compact is on (default) or off: whether record rewrites
	// timer-flushed streams as large batches at a clean end.
	Compact = "COMMPROF_COMPACT"
	// Clock, set to "measure", has the PMPI library measure every rank's
	// clock offset, as if each rank were on a host of its own.
	Clock = "COMMPROF_CLOCK"
	// JoinTimeout is how long ranks wait for every rank to join the job
	// (commprof's rendezvous) or the recording (the PMPI library).
	JoinTimeout = "COMMPROF_JOIN_TIMEOUT"
	// PMPILibrary names the PMPI library to preload, overriding the one
	// beside the commprof binary.
	PMPILibrary = "COMMPROF_PMPI_LIB"
	// MPI names the MPI (openmpi, mpich) a launcher belongs to.
	MPI = "COMMPROF_MPI"
	// Sample is how often each rank samples its memory, CPU time and
	// energy: a period (100ms, the default), a rate (10hz) or off.
	Sample = "COMMPROF_SAMPLE"
	// Powercap is the directory the energy counters are read from
	// (default /sys/class/powercap).
	Powercap = "COMMPROF_POWERCAP"
)

// How commprof's own ranks find each other and talk (collectives'
// JobFromEnv; docs/launching.md). The local launcher sets them; an
// external launcher sets its own rank and size variables instead.
const (
	Rank          = "COMMPROF_RANK"
	Size          = "COMMPROF_SIZE"
	LocalRank     = "COMMPROF_LOCAL_RANK"
	LocalSize     = "COMMPROF_LOCAL_SIZE"
	Coord         = "COMMPROF_COORD"          // rank 0's address
	CoordFD       = "COMMPROF_COORD_FD"       // a listening socket rank 0 inherits
	RendezvousDir = "COMMPROF_RENDEZVOUS_DIR" // where ranks on one host find rank 0 without COORD
	JobID         = "COMMPROF_JOB_ID"
	Secret        = "COMMPROF_SECRET" // the job's key: ranks refuse peers without it
	PeerTimeout   = "COMMPROF_PEER_TIMEOUT"
	Advertise     = "COMMPROF_ADVERTISE" // the address a rank gives its peers
	RawIO         = "COMMPROF_RAW_IO"
	TCPCongestion = "COMMPROF_TCP_CONGESTION"
	Transport     = "COMMPROF_TRANSPORT" // auto, shm or tcp: how ranks on one machine talk
	ShmSpin       = "COMMPROF_SHM_SPIN"  // how long an idle rank polls its shared-memory links before it sleeps
)

// Around a rank's program (rankrun and inject).
const (
	// Inject carries the faults of a job to its ranks, in inject.Parse's
	// syntax, separated by ';'.
	Inject = "COMMPROF_INJECT"
	// Progress is "1" when the commprof that started the ranks writes to
	// a terminal, "0" when not: rank 0 shows its progress only on a
	// terminal.
	Progress = "COMMPROF_PROGRESS"
	// CPUProfile, when set, is the prefix of a CPU profile each rank
	// writes (PREFIX.rankN).
	CPUProfile = "COMMPROF_CPUPROFILE"
)

// The test suite's switches.
const (
	// RequireDeps, when set (make test sets it), makes a test whose
	// outside dependency (node, Chromium, mpirun) is missing fail instead
	// of skipping.
	RequireDeps = "COMMPROF_REQUIRE_DEPS"
	// Screenshots names a directory where the browser tests leave their
	// screenshots.
	Screenshots = "COMMPROF_SCREENSHOTS"
	// LoadRun names a recorded run the serve tests use instead of
	// recording one.
	LoadRun = "COMMPROF_LOAD_RUN"
	// Scale4096, when set, has the tests of pages at scale draw a
	// 4,096-rank run too.
	Scale4096 = "COMMPROF_SCALE_4096"
)
