// Package pmpi records unmodified MPI programs through the MPI profiling
// interface (PMPI). The recording itself is a C library, in c/, that a
// launcher's ranks load with LD_PRELOAD: its MPI_* functions stamp each
// call, call the MPI library's PMPI_* twin, and write the rank's events
// as commprof's trace format v1 (an Arrow IPC stream per rank,
// rank-NNNNN.arrows, in COMMPROF_TRACE_DIR). It is built once per MPI
// with that MPI's compiler wrapper (`make pmpi`), as
// libcommprof-pmpi-openmpi.so and libcommprof-pmpi-mpich.so.
//
// This package is the Go side of it, for `commprof record`: which MPI a
// launcher belongs to (DetectFlavor), where its library is (FindLibrary),
// what the launcher must be given so that every rank loads it (Prepare),
// and, once the launcher has exited, the run's manifest completed from
// the streams the ranks wrote (Finish). docs/mpi.md is the user's guide.
//
// The C library's schema message is generated from the trace package's
// own writer (internal/genschema), so the two cannot disagree.
package pmpi

//go:generate go run ./internal/genschema -o c/schema.h
