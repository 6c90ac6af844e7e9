// Package importers turns traces written by other tools into commprof runs:
// a directory of trace format v1 streams, one per rank, and a run.json
// whose source says where the events came from and what could not be
// recovered. Every analysis, report and export then works on the import as
// on a recorded run.
//
// Each input format has its own file: horovod.go (HOROVOD_TIMELINE),
// kineto.go (PyTorch profiler traces), nccllog.go (NCCL_DEBUG output),
// inspector.go (NCCL Inspector JSON Lines) and nccltests.go (nccl-tests
// result tables). detect.go tells the formats apart from their content;
// chrome.go streams the Chrome trace JSON that Horovod and Kineto write;
// sink.go writes the rank streams. docs/import.md describes each format,
// how to produce it and what is recovered.
//
// Inputs are read as streams (gzip is undone transparently), never loaded
// whole, so a timeline of hundreds of MB imports in bounded memory. An
// input cut short (a job killed while writing) imports everything before
// the cut, and the manifest says what was cut; input that is not the
// format is refused with an error naming the file and the place.
package importers
