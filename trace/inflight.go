package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"time"
)

// The in-flight state: beside its stream, each rank keeps a small file,
// inflight/rank-NNNNN.bin in the run directory, that it rewrites in
// memory (the file is mapped) at every call's entry and return, so that
// others can read the call a rank is blocked in without its help. The
// PMPI library (interpose/pmpi/c/inflight.c) and commprof's own ranks
// write it; `commprof record` and `commprof doctor` read it. Layout,
// little-endian, InFlightSize bytes:
//
//	0   magic "CPINFL01"       8   version uint32 (1)   12  size uint32
//	16  rank int32             20  world int32          24  pid int32      28 state int32
//	32  gen uint64: odd while a write is under way
//	40  completed int64: calls returned so far
//	48  entry_ns int64: the call's entry, trace time  56 entry_unix int64: the same, ns since 1970
//	64  exit_unix int64: the last return, ns since 1970
//	72  seq int64 (-1: none)   80  bytes int64
//	88  root int32 (world rank, -1 none)  92 peer int32 (world rank, -1 none, -2 any source)
//	96  comm_size int32        100 kind int32
//	104 op [24]  128 dtype [32]  160 redop [16]  176 comm [96]  272 host [64] (NUL-padded)
//	336 exit_ns int64: the last return, trace time   344 code int64: MPI_Abort's error code
//	352 members int32: world ranks in the communicator, -1 if unknown
//	360 member [128]byte: bit r set when world rank r (< 1024) belongs to it
//	488 error int32: the last call's error code (0: it succeeded)
//	512 recent_n int64: collective calls returned so far; the last 8 are in
//	520 recent [8], each 96 bytes, call n at (n mod 8): seq int64, bytes int64,
//	    root int32, error int32, op [16], comm [32], dtype [16], redop [8]
//	    (strings cut to fit, NUL-terminated)
const (
	InFlightSize = 1536
	InFlightDir  = "inflight"
	// StallText and StallJSON are record's stall report in the run
	// directory (docs/doctor.md).
	StallText       = "stall.txt"
	StallJSON       = "stall.json"
	inFlightMagic   = "CPINFL01"
	inFlightVersion = 1
)

// InFlightState is what a rank is doing, as its in-flight file says.
type InFlightState int32

// States of a rank's in-flight file.
const (
	InFlightStarting   InFlightState = iota // set up, no call yet
	InFlightComputing                       // between calls: the fields describe the last call
	InFlightBlocked                         // inside a call: the fields describe it
	InFlightFinalizing                      // in MPI_Finalize (or the runtime's end)
	InFlightFinished                        // finalized
	InFlightAborted                         // called MPI_Abort (Code)
)

func (s InFlightState) String() string {
	switch s {
	case InFlightStarting:
		return "starting"
	case InFlightComputing:
		return "computing"
	case InFlightBlocked:
		return "blocked"
	case InFlightFinalizing:
		return "finalizing"
	case InFlightFinished:
		return "finished"
	case InFlightAborted:
		return "aborted"
	}
	return "state " + strconv.Itoa(int(s))
}

// InFlightKind is the kind of call.
type InFlightKind int32

// Kinds of call in an in-flight file.
const (
	InFlightCollective InFlightKind = iota
	InFlightSend
	InFlightRecv
	InFlightWait
	InFlightOther
)

func (k InFlightKind) String() string {
	return [...]string{"collective", "send", "recv", "wait", "other"}[min(max(int(k), 0), 4)]
}

// AnySource is InFlight.Peer for a receive from any rank.
const AnySource = -2

// InFlight is one rank's in-flight file, decoded.
type InFlight struct {
	Rank, World, PID int
	Host             string
	State            InFlightState
	Kind             InFlightKind
	Completed        int64     // calls returned so far
	Op               string    // allreduce, broadcast, ..., send, recv, sendrecv, wait, finalize
	Comm             string    // the communicator's name, as in the trace's comm column
	CommSize         int       // its size
	Members          []int     // its world ranks, nil when not known
	Seq              int64     // the call's sequence number on Comm (a message's tag); -1 none
	Bytes            int64     // payload bytes
	DType, RedOp     string    // datatype, reduction operation ("" where none)
	Root, Peer       int       // world ranks; -1 none; Peer AnySource
	EntryNS, ExitNS  int64     // the call's entry and the last return, trace time (ns since the run's epoch on this rank's clock)
	Entry, Exit      time.Time // the same, wall clock
	Code             int64     // MPI_Abort's error code
	Error            int       // the last call's error code, 0 if it succeeded
	// Recent are the last collective calls the rank returned from, oldest
	// first (at most InFlightRecent).
	Recent []InFlightCall
}

// InFlightRecent is how many of its last collective calls an in-flight
// file keeps.
const InFlightRecent = 8

// InFlightCall is one collective call an in-flight file keeps. Its
// strings are cut to the file's fields (Comm to 31 bytes).
type InFlightCall struct {
	Op, Comm, DType, RedOp string
	Seq, Bytes             int64
	Root, Error            int
}

// InFlightFile is the path of rank's in-flight file in run directory dir.
func InFlightFile(dir string, rank int) string {
	return filepath.Join(dir, InFlightDir, fmt.Sprintf("rank-%05d.bin", rank))
}

var inFlightRE = regexp.MustCompile(`^rank-(\d{5,})\.bin$`)

// ErrInFlightTorn means a rank was writing its in-flight file at every
// try to read it.
var ErrInFlightTorn = errors.New("in-flight file changing while read")

// DecodeInFlight decodes an in-flight file's bytes.
func DecodeInFlight(b []byte) (*InFlight, error) {
	if len(b) < InFlightSize || string(b[:8]) != inFlightMagic {
		return nil, fmt.Errorf("not an in-flight file (%d bytes)", len(b))
	}
	le := binary.LittleEndian
	if v := le.Uint32(b[8:]); v != inFlightVersion {
		return nil, fmt.Errorf("in-flight file version %d, want %d", v, inFlightVersion)
	}
	if gen := le.Uint64(b[32:]); gen%2 == 1 {
		return nil, ErrInFlightTorn
	}
	i32 := func(o int) int { return int(int32(le.Uint32(b[o:]))) }
	i64 := func(o int) int64 { return int64(le.Uint64(b[o:])) }
	str := func(o, n int) string {
		s := b[o : o+n]
		if i := bytes.IndexByte(s, 0); i >= 0 {
			s = s[:i]
		}
		return string(s)
	}
	f := &InFlight{Rank: i32(16), World: i32(20), PID: i32(24), State: InFlightState(i32(28)),
		Completed: i64(40), EntryNS: i64(48), Seq: i64(72), Bytes: i64(80), Root: i32(88), Peer: i32(92),
		CommSize: i32(96), Kind: InFlightKind(i32(100)), Op: str(104, 24), DType: str(128, 32), RedOp: str(160, 16),
		Comm: str(176, 96), Host: str(272, 64), ExitNS: i64(336), Code: i64(344), Error: i32(488)}
	if u := i64(56); u > 0 {
		f.Entry = time.Unix(0, u)
	}
	if u := i64(64); u > 0 {
		f.Exit = time.Unix(0, u)
	}
	if n := i64(512); n > 0 {
		first := max(n-InFlightRecent, 0)
		for k := first; k < n; k++ {
			o := 520 + int(k%InFlightRecent)*96
			f.Recent = append(f.Recent, InFlightCall{Seq: i64(o), Bytes: i64(o + 8), Root: i32(o + 16), Error: i32(o + 20),
				Op: str(o+24, 16), Comm: str(o+40, 32), DType: str(o+72, 16), RedOp: str(o+88, 8)})
		}
	}
	if n := i32(352); n >= 0 {
		f.Members = []int{}
		for r := 0; r < 1024; r++ {
			if b[360+r/8]&(1<<(r%8)) != 0 {
				f.Members = append(f.Members, r)
			}
		}
	}
	return f, nil
}

// EncodeInFlight writes f into b (InFlightSize bytes) with sequence
// counter gen (even: complete), for writers in Go and for tests.
func EncodeInFlight(b []byte, f *InFlight, gen uint64) {
	le := binary.LittleEndian
	clear(b[:InFlightSize])
	copy(b, inFlightMagic)
	le.PutUint32(b[8:], inFlightVersion)
	le.PutUint32(b[12:], InFlightSize)
	p32 := func(o, v int) { le.PutUint32(b[o:], uint32(int32(v))) }
	p64 := func(o int, v int64) { le.PutUint64(b[o:], uint64(v)) }
	pstr := func(o, n int, s string) { copy(b[o:o+n-1], s) }
	p32(16, f.Rank)
	p32(20, f.World)
	p32(24, f.PID)
	p32(28, int(f.State))
	le.PutUint64(b[32:], gen)
	p64(40, f.Completed)
	p64(48, f.EntryNS)
	if !f.Entry.IsZero() {
		p64(56, f.Entry.UnixNano())
	}
	if !f.Exit.IsZero() {
		p64(64, f.Exit.UnixNano())
	}
	p64(72, f.Seq)
	p64(80, f.Bytes)
	p32(88, f.Root)
	p32(92, f.Peer)
	p32(96, f.CommSize)
	p32(100, int(f.Kind))
	pstr(104, 24, f.Op)
	pstr(128, 32, f.DType)
	pstr(160, 16, f.RedOp)
	pstr(176, 96, f.Comm)
	pstr(272, 64, f.Host)
	p64(336, f.ExitNS)
	p64(344, f.Code)
	p32(488, f.Error)
	rs := f.Recent[max(len(f.Recent)-InFlightRecent, 0):]
	p64(512, int64(len(rs)))
	for k, c := range rs {
		o := 520 + k*96
		p64(o, c.Seq)
		p64(o+8, c.Bytes)
		p32(o+16, c.Root)
		p32(o+20, c.Error)
		pstr(o+24, 16, c.Op)
		pstr(o+40, 32, c.Comm)
		pstr(o+72, 16, c.DType)
		pstr(o+88, 8, c.RedOp)
	}
	if f.Members == nil {
		p32(352, -1)
		return
	}
	p32(352, len(f.Members))
	for _, r := range f.Members {
		if r < 0 || r >= 1024 {
			p32(352, -1)
			clear(b[360:488])
			return
		}
		b[360+r/8] |= 1 << (r % 8)
	}
}

// ReadInFlight reads one in-flight file, retrying while its rank is
// writing it.
func ReadInFlight(path string) (*InFlight, error) {
	var last error
	for try := 0; try < 50; try++ {
		a, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(a, b) {
			last = ErrInFlightTorn
			time.Sleep(time.Millisecond)
			continue
		}
		f, err := DecodeInFlight(a)
		if errors.Is(err, ErrInFlightTorn) {
			last = err
			time.Sleep(time.Millisecond)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		return f, nil
	}
	return nil, fmt.Errorf("reading %s: %w", path, last)
}

// ReadInFlightDir reads the in-flight files of run directory dir, by
// rank; a run without any gives none and no error. Files that cannot be
// read are returned as problems.
func ReadInFlightDir(dir string) ([]*InFlight, []error) {
	ents, err := os.ReadDir(filepath.Join(dir, InFlightDir))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, []error{err}
	}
	var out []*InFlight
	var problems []error
	for _, e := range ents {
		if !inFlightRE.MatchString(e.Name()) {
			continue
		}
		f, err := ReadInFlight(filepath.Join(dir, InFlightDir, e.Name()))
		if err != nil {
			problems = append(problems, err)
			continue
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rank < out[j].Rank })
	return out, problems
}
