package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/zstd"
)

// messageGuard sits between a stream and Arrow's IPC reader and checks the
// framing of every message before Arrow sees it: the metadata length, the
// body length against what the stream can hold, and, in the schema, the
// counts Arrow allocates by (fields, children, metadata), which a corrupt
// file could set to billions. Arrow reads what passes unchanged.
type messageGuard struct {
	r       io.Reader
	limit   int64 // largest body or metadata accepted
	pending []byte
	first   bool
	err     error
	zstd    *zstd.Decoder // one for the stream, made on first use
	scratch []byte
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

func (g *messageGuard) Read(p []byte) (int, error) {
	if len(g.pending) == 0 {
		if g.err != nil {
			return 0, g.err
		}
		g.err = g.next()
		if len(g.pending) == 0 {
			return 0, g.err
		}
	}
	n := copy(p, g.pending)
	g.pending = g.pending[n:]
	return n, nil
}

// next loads the next message (prefix, metadata and body) into pending.
// On a short read it passes on what it has, so Arrow sees the same cut.
func (g *messageGuard) next() error {
	var pre [8]byte
	n, err := io.ReadFull(g.r, pre[:4])
	if err != nil {
		g.pending = append(g.pending[:0], pre[:n]...)
		return err
	}
	if binary.LittleEndian.Uint32(pre[:4]) != 0xFFFFFFFF {
		return fmt.Errorf("%w: no continuation marker", errFraming)
	}
	n, err = io.ReadFull(g.r, pre[4:8])
	if err != nil {
		g.pending = append(g.pending[:0], pre[:4+n]...)
		return err
	}
	metaLen := int64(int32(binary.LittleEndian.Uint32(pre[4:8])))
	if metaLen == 0 { // end of stream
		g.pending = append(g.pending[:0], pre[:]...)
		return io.EOF
	}
	if metaLen < 0 || metaLen > 1<<20 || metaLen > g.limit {
		return fmt.Errorf("%w: a message's metadata claims %d bytes", errFraming, metaLen)
	}
	buf := make([]byte, 8+metaLen)
	copy(buf, pre[:])
	n, err = io.ReadFull(g.r, buf[8:])
	if err != nil {
		g.pending = buf[:8+n]
		return err
	}
	meta := buf[8:]
	body, err := g.check(meta)
	if err != nil {
		return err
	}
	if body > 0 {
		full := make([]byte, len(buf)+int(body))
		copy(full, buf)
		n, err = io.ReadFull(g.r, full[len(buf):])
		g.pending = full[:len(buf)+n]
		if err != nil {
			return err
		}
		if out, ok, err := g.inflate(meta, full[len(buf):]); err != nil {
			return err
		} else if ok {
			g.pending = append(buf, out...)
		}
		return nil
	}
	g.pending = buf
	return nil
}

// inflate decompresses a zstd-compressed batch's buffers with one decoder
// kept for the whole stream, and rewrites the message in place as an
// uncompressed one (buffer offsets and lengths, body length, and the
// compression field dropped from the table's vtable). Arrow Go v15 would
// otherwise make a new zstd decoder for every batch, which costs more than
// the decoding. It reports ok == false for messages it leaves alone.
func (g *messageGuard) inflate(meta, body []byte) (out []byte, ok bool, err error) {
	const (
		dictionaryBatch = 2
		recordBatch     = 3
		zstdCodec       = 1
	)
	f := &fb{b: meta}
	msg := f.ref(0)
	hp, tp := f.field(msg, 2), f.field(msg, 1)
	if hp < 0 || tp < 0 || tp >= len(meta) || f.err != nil {
		return nil, false, nil
	}
	rb := f.ref(hp)
	switch meta[tp] {
	case recordBatch:
	case dictionaryBatch:
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
