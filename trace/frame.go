package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
)

// messageGuard reads a stream's messages and checks the framing of every
// message before anything is decoded from it: the metadata length, the
// body length against what the stream can hold, and, in the schema, the
// counts Arrow allocates by (fields, children, metadata), which a corrupt
// file could set to billions. Arrow's IPC reader gets the schema message
// from it (it is an ipc.MessageReader); the Reader decodes dictionary and
// record batches itself (decode.go).
//
// Record batch bodies are read into a buffer reused from one batch to the
// next: what is decoded from a body without a copy is valid until the next
// message is read.
type messageGuard struct {
	r      io.Reader
	limit  int64 // largest body or metadata accepted
	n      int64 // bytes read from r
	eos    bool  // the end-of-stream marker was read
	short  bool  // the input ended inside a message
	raw    []byte
	first  bool   // the next message is the stream's first
	schema []byte // the schema message's metadata
}

func newMessageGuard(r io.Reader, limit int64) *messageGuard {
	return &messageGuard{r: r, limit: limit, first: true}
}

var errFraming = errors.New("corrupt message framing")

// Retain and Release implement ipc.MessageReader; the guard's buffers are
// the garbage collector's.
func (g *messageGuard) Retain()  {}
func (g *messageGuard) Release() {}

// read fills p from the stream; a short read is io.ErrUnexpectedEOF, and
// no bytes at all io.EOF.
func (g *messageGuard) read(p []byte) error {
	n, err := io.ReadFull(g.r, p)
	g.n += int64(n)
	g.short = g.short || err == io.ErrUnexpectedEOF || (err == io.EOF && len(p) > 0 && g.n > 0)
	return err
}

// Arrow message header types.
const (
	msgSchema          = 1
	msgDictionaryBatch = 2
	msgRecordBatch     = 3
)

// Message reads the next message for Arrow's reader.
func (g *messageGuard) Message() (*ipc.Message, error) {
	kind, meta, body, err := g.next()
	if err != nil {
		return nil, err
	}
	if kind == msgRecordBatch {
		body = append([]byte(nil), body...) // Arrow may keep it
	}
	return ipc.NewMessage(memory.NewBufferBytes(meta), memory.NewBufferBytes(body)), nil
}

// next reads the next message: its header type, metadata and body. It
// returns io.EOF at the end-of-stream marker (eos is then set) and at a
// clean end of the file without one; a stream cut inside a message gives
// an error wrapping io.ErrUnexpectedEOF. A record batch's body is valid
// until the next call.
func (g *messageGuard) next() (kind int, meta, body []byte, err error) {
	var pre [8]byte
	switch err := g.read(pre[:4]); {
	case err == io.EOF:
		return 0, nil, nil, io.EOF
	case err != nil:
		return 0, nil, nil, fmt.Errorf("reading a message's continuation marker: %w", err)
	}
	if binary.LittleEndian.Uint32(pre[:4]) != 0xFFFFFFFF {
		return 0, nil, nil, fmt.Errorf("%w: no continuation marker", errFraming)
	}
	if err := g.read(pre[4:8]); err != nil {
		return 0, nil, nil, fmt.Errorf("reading a message's length: %w", unexpected(err))
	}
	metaLen := int64(int32(binary.LittleEndian.Uint32(pre[4:8])))
	if metaLen == 0 {
		g.eos = true
		return 0, nil, nil, io.EOF
	}
	if metaLen < 0 || metaLen > 1<<20 || metaLen > g.limit {
		return 0, nil, nil, fmt.Errorf("%w: a message's metadata claims %d bytes", errFraming, metaLen)
	}
	meta = make([]byte, metaLen)
	if err := g.read(meta); err != nil {
		return 0, nil, nil, fmt.Errorf("reading a message's metadata: %w", unexpected(err))
	}
	bodyLen, err := g.check(meta)
	if err != nil {
		return 0, nil, nil, err
	}
	kind = msgType(meta)
	if kind == msgRecordBatch {
		if int64(cap(g.raw)) < bodyLen {
			g.raw = make([]byte, bodyLen)
		}
		body = g.raw[:bodyLen]
	} else {
		body = make([]byte, bodyLen)
	}
	if err := g.read(body); err != nil {
		return 0, nil, nil, fmt.Errorf("reading a message's body: %w", unexpected(err))
	}
	return kind, meta, body, nil
}

// unexpected turns the io.EOF of a read that began inside a message into
// io.ErrUnexpectedEOF: the stream was cut there.
func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// msgType returns a message's header type, or -1.
func msgType(meta []byte) int {
	f := &fb{b: meta}
	tp := f.field(f.ref(0), 1)
	if tp < 0 || tp >= len(meta) || f.err != nil {
		return -1
	}
	return int(meta[tp])
}

// fb reads a flatbuffer with every access bounds-checked.
type fb struct {
	b   []byte
	err error
}

func (f *fb) u32(pos int) int {
	if pos < 0 || pos+4 > len(f.b) {
		f.err = fmt.Errorf("%w: metadata read out of bounds", errFraming)
		return 0
	}
	return int(binary.LittleEndian.Uint32(f.b[pos:]))
}

func (f *fb) u16(pos int) int {
	if pos < 0 || pos+2 > len(f.b) {
		f.err = fmt.Errorf("%w: metadata read out of bounds", errFraming)
		return 0
	}
	return int(binary.LittleEndian.Uint16(f.b[pos:]))
}

func (f *fb) u8(pos int) int {
	if pos < 0 || pos+1 > len(f.b) {
		f.err = fmt.Errorf("%w: metadata read out of bounds", errFraming)
		return 0
	}
	return int(f.b[pos])
}

func (f *fb) i64(pos int) int64 {
	if pos < 0 || pos+8 > len(f.b) {
		f.err = fmt.Errorf("%w: metadata read out of bounds", errFraming)
		return 0
	}
	return int64(binary.LittleEndian.Uint64(f.b[pos:]))
}

// field returns the position of table t's field slot, or -1 if absent.
func (f *fb) field(t, slot int) int {
	vt := t - int(int32(f.u32(t)))
	vlen := f.u16(vt)
	if f.err != nil || 4+2*slot >= vlen {
		return -1
	}
	off := f.u16(vt + 4 + 2*slot)
	if off == 0 {
		return -1
	}
	return t + off
}

// ref follows the offset stored at pos.
func (f *fb) ref(pos int) int { return pos + f.u32(pos) }

// vector returns the start and length of the vector referenced at field
// slot of table t (length 0 if absent), checking it fits the buffer.
func (f *fb) vector(t, slot, elem int) (int, int) {
	p := f.field(t, slot)
	if p < 0 || f.err != nil {
		return 0, 0
	}
	v := f.ref(p)
	n := f.u32(v)
	if f.err == nil && (n < 0 || v+4+n*elem > len(f.b)) {
		f.err = fmt.Errorf("%w: a vector of %d elements overruns the metadata", errFraming, n)
		return 0, 0
	}
	return v + 4, n
}

// check validates one message's metadata and returns its body length.
func (g *messageGuard) check(meta []byte) (int64, error) {
	f := &fb{b: meta}
	msg := f.ref(0)
	var body int64
	if p := f.field(msg, 3); p >= 0 && p+8 <= len(meta) {
		body = int64(binary.LittleEndian.Uint64(meta[p:]))
	}
	if body < 0 || body > g.limit {
		return 0, fmt.Errorf("%w: a message body claims %d bytes", errFraming, body)
	}
	htype := -1
	if p := f.field(msg, 1); p >= 0 && p < len(meta) {
		htype = int(meta[p])
	}
	if g.first {
		g.first = false
		if htype != msgSchema {
			return 0, fmt.Errorf("%w: the stream does not start with a schema", errFraming)
		}
		hp := f.field(msg, 2)
		if hp < 0 {
			return 0, fmt.Errorf("%w: the schema message has no schema", errFraming)
		}
		schema := f.ref(hp)
		fields, nf := f.vector(schema, 1, 4)
		f.vector(schema, 2, 4) // custom metadata
		f.vector(schema, 3, 8) // features
		for i := 0; i < nf && f.err == nil; i++ {
			field := f.ref(fields + 4*i)
			if _, nc := f.vector(field, 5, 4); nc > 0 {
				return 0, fmt.Errorf("%w: field %d has %d children; commprof columns have none", ErrNotTrace, i, nc)
			}
			f.vector(field, 6, 4)
		}
		g.schema = meta
	}
	return body, f.err
}
