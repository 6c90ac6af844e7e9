package torch

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/commprof/commprof/trace"
)

// The spool is what the Python recorder (py/commprof_torch.py) writes
// for one rank as the job runs: the magic, then records of a 5-byte
// header (u8 type, u32 little-endian payload length) and a payload. A rank
// that was killed leaves a spool cut anywhere: ReadSpool keeps every
// whole record before the cut.
const spoolMagic = "CPTSPL01"

// Record types.
const (
	recMeta   = 1 // JSON: the rank (first), or a process group
	recString = 2 // u16 id, then the string's UTF-8 bytes
	recEvent  = 3 // an event: evLen bytes, see ReadSpool
	recEnd    = 4 // the recorder closed the spool at the rank's exit
)

// evLen is the payload of an event record: kind u8; name, comm, dtype,
// label u16 (string ids); start, dur, bytes, seq int64; peer, root, step
// int32; value float64.
const evLen = 1 + 4*2 + 4*8 + 3*4 + 8

// maxRecord bounds a record's payload: a longer one is damage.
const maxRecord = 1 << 20

// RankMeta is what a rank says of itself as it opens its spool.
type RankMeta struct {
	Rank      int      `json:"rank"`
	WorldSize int      `json:"world_size"`
	Backend   string   `json:"backend"`
	Host      string   `json:"host"`
	PID       int      `json:"pid"`
	MonoNS    int64    `json:"mono_ns"` // CLOCK_MONOTONIC when the spool was opened
	WallNS    int64    `json:"wall_ns"` // the wall clock at the same moment
	Torch     string   `json:"torch"`
	Python    string   `json:"python"`
	Argv      []string `json:"argv"`
	RunID     string   `json:"run_id"`
}

// Group is a process group a rank used: its name and its members' world
// ranks in their group rank order.
type Group struct {
	Name    string `json:"group"`
	Ranks   []int  `json:"ranks"`
	Backend string `json:"backend"`
}

// Spool is one rank's spool, read. Event times are CLOCK_MONOTONIC ns.
type Spool struct {
	Meta   RankMeta
	Groups []Group
	Events []trace.Event
	// Ended is true when the recorder closed the spool (the rank exited
	// through Python's exit); Cut is the damage that ended it early, if
	// any (a rank killed mid-record).
	Ended bool
	Cut   error
}

// ErrNotSpool is returned for a file that is not a spool.
var ErrNotSpool = errors.New("not a commprof PyTorch spool")

// ReadSpool reads a spool. A spool cut short is not an error: what came
// before the cut is returned, with Cut saying where it ended.
func ReadSpool(r io.Reader) (*Spool, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	magic := make([]byte, len(spoolMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != spoolMagic {
		return nil, ErrNotSpool
	}
	s := &Spool{}
	strs := []string{}
	var off int64 = int64(len(spoolMagic))
	str := func(id uint16) (string, error) {
		if int(id) >= len(strs) {
			return "", fmt.Errorf("string %d used before it was defined", id)
		}
		return strs[id], nil
	}
	var hdr [5]byte
	buf := make([]byte, 0, 256)
	haveMeta := false
	for {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			if err != io.EOF {
				s.Cut = fmt.Errorf("cut in a record's header at byte %d", off)
			} else if !s.Ended {
				s.Cut = fmt.Errorf("ends at byte %d without the recorder's end record (the rank did not exit through Python)", off)
			}
			break
		}
		typ, n := hdr[0], binary.LittleEndian.Uint32(hdr[1:])
		if n > maxRecord {
			s.Cut = fmt.Errorf("a record of %d bytes at byte %d: damaged", n, off)
			break
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		p := buf[:n]
		if _, err := io.ReadFull(br, p); err != nil {
			s.Cut = fmt.Errorf("cut in a record at byte %d", off)
			break
		}
		off += 5 + int64(n)
		var err error
		switch typ {
		case recMeta:
			var probe struct {
				Group *string `json:"group"`
			}
			if err = json.Unmarshal(p, &probe); err != nil {
				break
			}
			if probe.Group != nil {
				var g Group
				if err = json.Unmarshal(p, &g); err == nil {
					s.Groups = append(s.Groups, g)
				}
			} else if !haveMeta {
				err = json.Unmarshal(p, &s.Meta)
				haveMeta = true
			}
		case recString:
			if n < 2 {
				err = errors.New("a string record without its id")
				break
			}
			id := binary.LittleEndian.Uint16(p)
			if int(id) != len(strs) {
				err = fmt.Errorf("string %d defined where %d was due", id, len(strs))
				break
			}
			strs = append(strs, string(p[2:]))
		case recEvent:
			if !haveMeta {
				err = errors.New("an event before the rank's metadata")
				break
			}
			if n != evLen {
				err = fmt.Errorf("an event record of %d bytes (want %d)", n, evLen)
				break
			}
			var e trace.Event
			e, err = decodeEvent(p, str)
			e.Rank = int32(s.Meta.Rank)
			s.Events = append(s.Events, e)
		case recEnd:
			s.Ended = true
		default:
			err = fmt.Errorf("unknown record type %d", typ)
		}
		if err != nil {
			s.Cut = fmt.Errorf("damaged record at byte %d: %w", off-5-int64(n), err)
			if typ == recEvent && len(s.Events) > 0 {
				s.Events = s.Events[:len(s.Events)-1]
			}
			break
		}
	}
	if !haveMeta {
		return nil, fmt.Errorf("%w: no rank metadata", ErrNotSpool)
	}
	if s.Meta.Rank < 0 || s.Meta.WorldSize < 1 || s.Meta.Rank >= s.Meta.WorldSize || s.Meta.WorldSize > trace.MaxWorldSize {
		return nil, fmt.Errorf("spool says rank %d of %d", s.Meta.Rank, s.Meta.WorldSize)
	}
	return s, nil
}

func decodeEvent(p []byte, str func(uint16) (string, error)) (trace.Event, error) {
	le := binary.LittleEndian
	var e trace.Event
	k := trace.Kind(p[0])
	if k < trace.KindCollective || k > trace.KindReduce && k != trace.KindSample {
		return e, fmt.Errorf("unknown event kind %d", p[0])
	}
	e.Kind = k
	var err [4]error
	e.Name, err[0] = str(le.Uint16(p[1:]))
	e.Comm, err[1] = str(le.Uint16(p[3:]))
	e.DType, err[2] = str(le.Uint16(p[5:]))
	e.Label, err[3] = str(le.Uint16(p[7:]))
	if e := errors.Join(err[:]...); e != nil {
		return trace.Event{}, e
	}
	e.Start = int64(le.Uint64(p[9:]))
	e.Dur = int64(le.Uint64(p[17:]))
	e.Bytes = int64(le.Uint64(p[25:]))
	e.Seq = int64(le.Uint64(p[33:]))
	e.Peer = int32(le.Uint32(p[41:]))
	e.Root = int32(le.Uint32(p[45:]))
	e.Step = int32(le.Uint32(p[49:]))
	e.Value = math.Float64frombits(le.Uint64(p[53:]))
	e.Chunk = -1
	if e.Dur < 0 || e.Bytes < 0 {
		return trace.Event{}, fmt.Errorf("an event of %d ns and %d bytes", e.Dur, e.Bytes)
	}
	return e, nil
}
