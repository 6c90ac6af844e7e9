// Package driver holds the pipelines behind commprof's commands: what a
// command does once its flags are parsed, as functions over options
// structs and writers, so that cmd/commprof is flags, usage and calls
// into here (google/pprof's internal/driver is the model). A pipeline
// reads runs through load, writes pages through report, and reruns the
// binary through internal/self.
package driver
