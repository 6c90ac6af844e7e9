package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow/go/v15/arrow/ipc"
	"github.com/apache/arrow/go/v15/arrow/memory"
	"github.com/klauspost/compress/zstd"
)

// messageGuard reads a stream's messages for Arrow's IPC reader (it is an
// ipc.MessageReader) and checks the framing of every message before Arrow
// sees it: the metadata length, the body length against what the stream
// can hold, and, in the schema, the counts Arrow allocates by (fields,
// children, metadata), which a corrupt file could set to billions.
//
// Record batch bodies are read into buffers reused from one batch to the
// next and handed to Arrow without a copy: a batch's arrays are valid
// until the next message is read, which is as long as the Reader uses
// them (Next and NextBatch copy the values out). Dictionary batches get
// buffers of their own, since Arrow keeps dictionaries for the stream's
// life.
type messageGuard struct {
	r       io.Reader
	limit   int64 // largest body or metadata accepted
	n       int64 // bytes read from r
	eos     bool  // the end-of-stream marker was read
	zstd    *zstd.Decoder
	raw     []byte // a record batch's body as read
	scratch []byte // a zstd record batch's body, decompressed
	first   bool   // the next message is the stream's first
}

func newMessageGuard(r io.Reader, limit int64) *messageGuard {
	return &messageGuard{r: r, limit: limit, first: true}
}

var errFraming = errors.New("corrupt message framing")

func (g *messageGuard) close() {
	if g.zstd != nil {
		g.zstd.Close()
		g.zstd = nil
	}
}

// Retain and Release implement ipc.MessageReader; the guard's buffers are
// the garbage collector's.
func (g *messageGuard) Retain()  {}
func (g *messageGuard) Release() {}

// read fills p from the stream; a short read is io.ErrUnexpectedEOF, and
// no bytes at all io.EOF.
func (g *messageGuard) read(p []byte) error {
	n, err := io.ReadFull(g.r, p)
	g.n += int64(n)
	return err
}

// Arrow message header types.
const (
	msgDictionaryBatch = 2
	msgRecordBatch     = 3
)

// Message reads the next message. It returns io.EOF at the end-of-stream
// marker (eos is then set) and at a clean end of the file without one; a
// stream cut inside a message gives an error wrapping
// io.ErrUnexpectedEOF.
func (g *messageGuard) Message() (*ipc.Message, error) {
	var pre [8]byte
	switch err := g.read(pre[:4]); {
	case err == io.EOF:
		return nil, io.EOF
	case err != nil:
		return nil, fmt.Errorf("reading a message's continuation marker: %w", err)
	}
	if binary.LittleEndian.Uint32(pre[:4]) != 0xFFFFFFFF {
		return nil, fmt.Errorf("%w: no continuation marker", errFraming)
	}
	if err := g.read(pre[4:8]); err != nil {
		return nil, fmt.Errorf("reading a message's length: %w", unexpected(err))
	}
	metaLen := int64(int32(binary.LittleEndian.Uint32(pre[4:8])))
	if metaLen == 0 {
		g.eos = true
		return nil, io.EOF
	}
	if metaLen < 0 || metaLen > 1<<20 || metaLen > g.limit {
		return nil, fmt.Errorf("%w: a message's metadata claims %d bytes", errFraming, metaLen)
	}
	meta := make([]byte, metaLen)
	if err := g.read(meta); err != nil {
		return nil, fmt.Errorf("reading a message's metadata: %w", unexpected(err))
	}
	bodyLen, err := g.check(meta)
	if err != nil {
		return nil, err
	}
	kind := msgType(meta)
	var body []byte
	if kind == msgRecordBatch {
		if int64(cap(g.raw)) < bodyLen {
			g.raw = make([]byte, bodyLen)
		}
		body = g.raw[:bodyLen]
	} else {
		body = make([]byte, bodyLen)
	}
	if err := g.read(body); err != nil {
		return nil, fmt.Errorf("reading a message's body: %w", unexpected(err))
	}
	if bodyLen > 0 {
		out, ok, err := g.inflate(meta, body)
		if err != nil {
			return nil, err
		}
		if ok {
			body = out
			if kind != msgRecordBatch {
				body = append([]byte(nil), out...)
			}
		}
	}
	return ipc.NewMessage(memory.NewBufferBytes(meta), memory.NewBufferBytes(body)), nil
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

// inflate decompresses a zstd-compressed batch's buffers with one decoder
// kept for the whole stream, and rewrites the message in place as an
// uncompressed one (buffer offsets and lengths, body length, and the
// compression field dropped from the table's vtable). Arrow Go v15 would
// otherwise make a new zstd decoder for every batch, which costs more than
// the decoding. It reports ok == false for messages it leaves alone.
func (g *messageGuard) inflate(meta, body []byte) (out []byte, ok bool, err error) {
	const zstdCodec = 1
	f := &fb{b: meta}
	msg := f.ref(0)
	hp, tp := f.field(msg, 2), f.field(msg, 1)
	if hp < 0 || tp < 0 || tp >= len(meta) || f.err != nil {
		return nil, false, nil
	}
	rb := f.ref(hp)
	switch meta[tp] {
	case msgRecordBatch:
	case msgDictionaryBatch:
		dp := f.field(rb, 1)
		if dp < 0 {
			return nil, false, nil
		}
		rb = f.ref(dp)
	default:
		return nil, false, nil
	}
	cp := f.field(rb, 3)
	if cp < 0 || f.err != nil {
		return nil, false, nil
	}
	comp := f.ref(cp)
	if codec := f.field(comp, 0); codec < 0 || codec >= len(meta) || meta[codec] != zstdCodec {
		return nil, false, nil // lz4 (or the default, lz4) is left to Arrow
	}
	bufs, nb := f.vector(rb, 2, 16)
	if f.err != nil {
		return nil, false, f.err
	}
	if g.zstd == nil {
		// A frame may declare any size; decode no more than a stream of
		// this length could honestly hold.
		maxMem := uint64(min(g.limit*64, 4<<30))
		if g.zstd, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxMem)); err != nil {
			return nil, false, err
		}
	}
	out = g.scratch[:0]
	for i := range nb {
		p := bufs + 16*i
		off := int64(binary.LittleEndian.Uint64(meta[p:]))
		ln := int64(binary.LittleEndian.Uint64(meta[p+8:]))
		if off < 0 || ln < 0 || off+ln > int64(len(body)) {
			return nil, false, fmt.Errorf("%w: a buffer lies outside its batch", errFraming)
		}
		for len(out)%8 != 0 {
			out = append(out, 0)
		}
		start := len(out)
		src := body[off : off+ln]
		switch {
		case ln == 0:
		case ln < 8:
			return nil, false, fmt.Errorf("%w: a compressed buffer without its length", errFraming)
		case int64(binary.LittleEndian.Uint64(src)) == -1: // stored uncompressed
			out = append(out, src[8:]...)
		default:
			want := int64(binary.LittleEndian.Uint64(src))
			if want < 0 || want > g.limit*64 {
				return nil, false, fmt.Errorf("%w: a buffer claims %d bytes uncompressed", errFraming, want)
			}
			if out, err = g.zstd.DecodeAll(src[8:], out); err != nil {
				return nil, false, fmt.Errorf("%w: %v", errFraming, err)
			}
			if int64(len(out)-start) != want {
				return nil, false, fmt.Errorf("%w: a buffer decompressed to %d bytes, not %d", errFraming, len(out)-start, want)
			}
		}
		binary.LittleEndian.PutUint64(meta[p:], uint64(start))
		binary.LittleEndian.PutUint64(meta[p+8:], uint64(len(out)-start))
	}
	for len(out)%8 != 0 {
		out = append(out, 0)
	}
	// Drop the compression field: its vtable entry becomes "absent".
	vt := rb - int(int32(f.u32(rb)))
	binary.LittleEndian.PutUint16(meta[vt+4+2*3:], 0)
	bl := f.field(msg, 3)
	if bl < 0 || bl+8 > len(meta) || f.err != nil {
		return nil, false, fmt.Errorf("%w: a batch without a body length", errFraming)
	}
	binary.LittleEndian.PutUint64(meta[bl:], uint64(len(out)))
	g.scratch = out
	return out, true, nil
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
	const schemaHeader = 1
	htype := -1
	if p := f.field(msg, 1); p >= 0 && p < len(meta) {
		htype = int(meta[p])
	}
	if g.first {
		g.first = false
		if htype != schemaHeader {
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
	}
	return body, f.err
}
