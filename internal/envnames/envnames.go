// Package envnames names the environment variables through which
// `commprof record` has a program's ranks record themselves: commprof's
// own ranks (internal/rankrun), the ranks of a user's MPI program through
// the PMPI library (interpose/pmpi, whose C side, interpose/pmpi/c,
// reads the same names), and the launchers that must pass them on. It
// imports nothing, so that every layer spells them from here.
package envnames

// The recording's variables.
const (
	// TraceDir is the run directory: ranks record only when it is set.
	TraceDir = "COMMPROF_TRACE_DIR"
	RunID    = "COMMPROF_RUN_ID"
	RunName  = "COMMPROF_RUN_NAME"
	// Codec is the stream compression commprof's own ranks write with.
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
