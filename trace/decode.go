package trace

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// decoder turns a stream's dictionary and record batch messages into
// Batches. It reads the Arrow IPC layout directly (the metadata's field
// nodes and buffers) rather than through Arrow's reader, for three
// reasons that together make reading several times faster:
//
//   - only the columns a caller asked for are decompressed;
//   - uncompressed buffers are used where they lie in the message body,
//     and fixed-width columns are Go slices over the bytes, never copied;
//   - a compressed buffer identical to the one the column had in the
//     previous batch (a column that is constant, as rank, root and comm
//     usually are) is not decompressed again.
//
// Arrow's reader still parses and checks the schema (NewReader).
type decoder struct {
	limit   int64 // largest buffer accepted, decompressed
	nfields int   // fields in the schema
	nbufs   int   // buffers per batch
	cols    [numCols]colDec
	dicts   map[int64][]string // dictionary id → values so far
	kinds   []Kind             // the kind dictionary's values, parsed
	zstd    *zstd.Decoder
	dictBuf [2][]byte // scratch for a dictionary's offsets and data
	kindIx  []int32   // scratch for the kind column's indices
	all     [numCols]bool
	// noLabels is the label dictionary of a stream without the column.
	noLabels []string
}

// colDec is one v1 column's place in a batch and its decoding state.
type colDec struct {
	field int   // index among the schema's fields; -1 for an optional column the stream lacks
	buf   int   // index of its values buffer among a batch's buffers
	width int   // bytes per value
	dict  int64 // dictionary id, or -1
	out   []byte
	memo  []byte // the compressed buffer out was decoded from
	valid bool   // out holds memo's values
}

// zstdSlack is the room the zstd decoder wants past a buffer's end to use
// its fast copies.
const zstdSlack = 64

// maxDictValues bounds a dictionary: commprof's hold operation, compute,
// mark, algorithm and communicator names, a few hundred at most.
const maxDictValues = 1 << 20

// Compression codecs in a batch's BodyCompression.
const (
	codecNone = -1
	codecLZ4  = 0 // LZ4_FRAME, also the field's default
	codecZstd = 1
)

// newDecoder lays out the v1 columns of a stream whose schema s (checked
// by columns) arrived in the schema message meta.
func newDecoder(s *arrow.Schema, cols [numCols]int, meta []byte, limit int64) (*decoder, error) {
	d := &decoder{limit: limit, nfields: len(s.Fields()), dicts: map[int64][]string{}, noLabels: []string{""}}
	// Where each field's buffers start: the IPC format lays out a
	// field's buffers in order (validity, then values or offsets and
	// data); commprof's columns have no children (messageGuard.check).
	first := make([]int, d.nfields)
	for i, f := range s.Fields() {
		first[i] = d.nbufs
		switch {
		case f.Type.ID() == arrow.NULL:
		case f.Type.ID() == arrow.BINARY_VIEW || f.Type.ID() == arrow.STRING_VIEW:
			return nil, fmt.Errorf("%w: column %q is %s, which this reader does not lay out", ErrNotTrace, f.Name, f.Type)
		default:
			d.nbufs += len(f.Type.Layout().Buffers)
		}
	}
	ids, err := dictionaryIDs(meta, d.nfields)
	if err != nil {
		return nil, err
	}
	for c, fi := range cols {
		cd := &d.cols[c]
		if fi < 0 {
			cd.field, cd.buf, cd.dict = -1, -1, -1
			continue
		}
		t := s.Field(fi).Type
		cd.field, cd.buf, cd.dict = fi, first[fi]+1, -1
		if dt, ok := t.(*arrow.DictionaryType); ok {
			cd.dict = ids[fi]
			if cd.dict < 0 {
				return nil, fmt.Errorf("%w: dictionary column %q has no dictionary id", ErrNotTrace, s.Field(fi).Name)
			}
			t = dt.IndexType
		}
		cd.width = t.(arrow.FixedWidthDataType).BitWidth() / 8
	}
	for i := range d.all {
		d.all[i] = true
	}
	return d, nil
}

// dictionaryIDs reads each field's dictionary id (-1 for none) from the
// schema message: Arrow Go's schema does not carry them.
func dictionaryIDs(meta []byte, nfields int) ([]int64, error) {
	f := &fb{b: meta}
	schema := f.ref(f.field(f.ref(0), 2))
	fields, n := f.vector(schema, 1, 4)
	if f.err != nil || n != nfields {
		return nil, fmt.Errorf("%w: the schema message has %d fields, Arrow read %d", ErrNotTrace, n, nfields)
	}
	ids := make([]int64, n)
	for i := range n {
		ids[i] = -1
		field := f.ref(fields + 4*i)
		if p := f.field(field, 4); p >= 0 {
			enc := f.ref(p)
			ids[i] = 0 // the id's default
			if q := f.field(enc, 0); q >= 0 {
				ids[i] = f.i64(q)
			}
		}
	}
	return ids, f.err
}

// batchLayout is a record batch's metadata: row count, field nodes,
// buffers and codec.
type batchLayout struct {
	f       *fb
	rows    int64
	nodes   int // position of the field node vector's first element
	nnodes  int
	bufs    int // position of the buffer vector's first element
	nbufs   int
	codec   int
	body    []byte
	decoder *decoder
}

// layout reads the RecordBatch table at rb.
func (d *decoder) layout(f *fb, rb int, body []byte) (batchLayout, error) {
	l := batchLayout{f: f, codec: codecNone, body: body, decoder: d}
	if p := f.field(rb, 0); p >= 0 {
		l.rows = f.i64(p)
	}
	l.nodes, l.nnodes = f.vector(rb, 1, 16)
	l.bufs, l.nbufs = f.vector(rb, 2, 16)
	if p := f.field(rb, 3); p >= 0 {
		l.codec = codecLZ4
		if q := f.field(f.ref(p), 0); q >= 0 {
			l.codec = int(int8(f.u8(q)))
		}
	}
	switch {
	case f.err != nil:
		return l, f.err
	case l.codec != codecNone && l.codec != codecLZ4 && l.codec != codecZstd:
		return l, fmt.Errorf("%w: unknown compression codec %d", errFraming, l.codec)
	case l.rows < 0:
		return l, fmt.Errorf("%w: a batch of %d rows", errFraming, l.rows)
	}
	return l, nil
}

// node returns field i's row and null counts.
func (l *batchLayout) node(i int) (rows, nulls int64) {
	p := l.nodes + 16*i
	return l.f.i64(p), l.f.i64(p + 8)
}

// buffer returns buffer i's bytes, decompressed: into cd's buffer, which
// is reused when the compressed bytes repeat cd's previous ones, or (cd
// nil) into scratch.
func (l *batchLayout) buffer(i int, cd *colDec, scratch *[]byte) ([]byte, error) {
	p := l.bufs + 16*i
	off, ln := l.f.i64(p), l.f.i64(p+8)
	if l.f.err != nil {
		return nil, l.f.err
	}
	if off < 0 || ln < 0 || off > int64(len(l.body)) || ln > int64(len(l.body))-off {
		return nil, fmt.Errorf("%w: a buffer lies outside its batch", errFraming)
	}
	src := l.body[off : off+ln]
	if l.codec == codecNone || ln == 0 {
		return src, nil
	}
	if ln < 8 {
		return nil, fmt.Errorf("%w: a compressed buffer without its length", errFraming)
	}
	want := int64(binary.LittleEndian.Uint64(src))
	if want == -1 { // stored uncompressed
		return src[8:], nil
	}
	d := l.decoder
	if want < 0 || want > d.limit {
		return nil, fmt.Errorf("%w: a buffer claims %d bytes uncompressed", errFraming, want)
	}
	if cd != nil && cd.valid && bytes.Equal(cd.memo, src) {
		return cd.out, nil
	}
	dst := scratch
	if cd != nil {
		cd.valid = false
		dst = &cd.out
	}
	var out []byte
	var err error
	switch l.codec {
	case codecZstd:
		if d.zstd == nil {
			// A frame may declare any size; decode no more than the limit.
			if d.zstd, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(d.limit))); err != nil {
				return nil, err
			}
		}
		// Room past the end lets the decoder copy in 16-byte blocks
		// (klauspost/compress falls back to exact copies without it).
		if cap(*dst) < int(want)+zstdSlack {
			*dst = make([]byte, 0, int(want)+zstdSlack)
		}
		out, err = d.zstd.DecodeAll(src[8:], (*dst)[:0])
	case codecLZ4:
		// An LZ4 block expands at most 255-fold: a larger claim is corrupt,
		// and is refused before anything is allocated for it.
		if want > 256*int64(len(src))+1<<16 {
			return nil, fmt.Errorf("%w: a %d-byte lz4 buffer claims %d bytes uncompressed", errFraming, len(src), want)
		}
		out, err = lz4Frames(src[8:], grow(*dst, int(want))[:0])
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errFraming, err)
	}
	if int64(len(out)) != want {
		return nil, fmt.Errorf("%w: a buffer decompressed to %d bytes, not %d", errFraming, len(out), want)
	}
	*dst = out
	if cd != nil {
		cd.memo = append(cd.memo[:0], src...)
		cd.valid = true
	}
	return out, nil
}

// close frees the decompressors.
func (d *decoder) close() {
	if d.zstd != nil {
		d.zstd.Close()
		d.zstd = nil
	}
}

// dictionary applies a dictionary batch: the values of one dictionary,
// replacing it or (a delta) appended to it.
func (d *decoder) dictionary(meta, body []byte) error {
	f := &fb{b: meta}
	db := f.ref(f.field(f.ref(0), 2))
	var id int64
	if p := f.field(db, 0); p >= 0 {
		id = f.i64(p)
	}
	delta := false
	if p := f.field(db, 2); p >= 0 {
		delta = f.u8(p) != 0
	}
	dp := f.field(db, 1)
	if f.err != nil || dp < 0 {
		return fmt.Errorf("%w: a dictionary batch without its data", errFraming)
	}
	used := false
	for _, cd := range d.cols {
		used = used || cd.dict == id
	}
	if !used {
		return f.err // a dictionary of a column commprof does not read
	}
	l, err := d.layout(f, f.ref(dp), body)
	if err != nil {
		return err
	}
	if l.nnodes != 1 || l.nbufs != 3 {
		return fmt.Errorf("%w: dictionary %d has %d columns and %d buffers, want 1 and 3", errFraming, id, l.nnodes, l.nbufs)
	}
	n, nulls := l.node(0)
	if n != l.rows || nulls != 0 {
		return fmt.Errorf("%w: dictionary %d has %d values (%d null) in a batch of %d", errFraming, id, n, nulls, l.rows)
	}
	offs, err := l.buffer(1, nil, &d.dictBuf[0])
	if err != nil {
		return err
	}
	data, err := l.buffer(2, nil, &d.dictBuf[1])
	if err != nil {
		return err
	}
	if prev := len(d.dicts[id]); n > maxDictValues || (delta && int64(prev)+n > maxDictValues) {
		return fmt.Errorf("%w: dictionary %d would hold more than %d values", errFraming, id, maxDictValues)
	}
	if int64(len(offs))/4 < n+1 {
		return fmt.Errorf("%w: dictionary %d has %d values but %d offsets", errFraming, id, n, len(offs)/4)
	}
	var vals []string
	if delta {
		vals = d.dicts[id]
	}
	vals = vals[:len(vals):len(vals)] // appending must not change a slice handed out before
	prev := int32(binary.LittleEndian.Uint32(offs))
	for j := range n {
		next := int32(binary.LittleEndian.Uint32(offs[4*(j+1):]))
		if prev < 0 || next < prev || int(next) > len(data) {
			return fmt.Errorf("%w: dictionary %d's value %d lies outside its data", errFraming, id, j)
		}
		vals = append(vals, string(data[prev:next]))
		prev = next
	}
	d.dicts[id] = vals
	if id == d.cols[1].dict {
		kinds := make([]Kind, len(vals))
		for j, v := range vals {
			// A kind this reader does not know (a later writer's) reads
			// as 0, which no analysis counts: readers skip such events.
			kinds[j], _ = ParseKind(v)
		}
		d.kinds = kinds
	}
	return nil
}

// batch decodes a record batch into b: the columns need marks, the rest
// left nil.
func (d *decoder) batch(meta, body []byte, b *Batch, need *[numCols]bool) error {
	f := &fb{b: meta}
	l, err := d.layout(f, f.ref(f.field(f.ref(0), 2)), body)
	if err != nil {
		return err
	}
	if l.nnodes != d.nfields || l.nbufs != d.nbufs {
		return fmt.Errorf("%w: a batch of %d columns and %d buffers, the schema has %d and %d", errFraming, l.nnodes, l.nbufs, d.nfields, d.nbufs)
	}
	n := int(l.rows)
	for c := range d.cols {
		if d.cols[c].field < 0 {
			continue
		}
		rows, nulls := l.node(d.cols[c].field)
		if rows != l.rows || nulls != 0 {
			return fmt.Errorf("column %s has %d rows (%d null) in a batch of %d", fields[c].Name, rows, nulls, l.rows)
		}
	}
	b.Len = n
	var vals [numCols][]byte
	for c := range d.cols {
		if !need[c] || d.cols[c].field < 0 {
			continue
		}
		cd := &d.cols[c]
		v, err := l.buffer(cd.buf, cd, nil)
		if err != nil {
			return err
		}
		if len(v)/cd.width < n { // not len(v) < n*width, which a huge n overflows
			return fmt.Errorf("column %s holds %d bytes for %d rows", fields[c].Name, len(v), n)
		}
		vals[c] = v[:n*cd.width]
	}
	b.Rank = view[int32](vals[0])
	b.Start, b.Dur, b.Bytes = view[int64](vals[3]), view[int64](vals[4]), view[int64](vals[5])
	b.Peer, b.Seq, b.Step = view[int32](vals[6]), view[int64](vals[7]), view[int32](vals[8])
	b.Root, b.Chunk = view[int32](vals[11]), view[int32](vals[12])
	b.Wait, b.Value = view[int64](vals[14]), view[float64](vals[15])
	var kind []int32
	if kind, _, err = d.indices(1, vals[1], d.kindIx); err != nil {
		return err
	}
	if kind == nil {
		b.Kind = nil
	} else {
		d.kindIx = kind
		b.Kind = grow(b.Kind, n)
		for j, k := range kind {
			b.Kind[j] = d.kinds[k]
		}
	}
	if b.Name, b.Names, err = d.indices(2, vals[2], b.Name); err != nil {
		return err
	}
	if b.Algo, b.Algos, err = d.indices(9, vals[9], b.Algo); err != nil {
		return err
	}
	if b.DType, b.DTypes, err = d.indices(10, vals[10], b.DType); err != nil {
		return err
	}
	if b.Comm, b.Comms, err = d.indices(13, vals[13], b.Comm); err != nil {
		return err
	}
	switch {
	case !need[colLabel]:
		b.Label, b.Labels = nil, nil
	case d.cols[colLabel].field < 0:
		// A stream written before the label column: every row's is "".
		b.Label = grow(b.Label, n)
		clear(b.Label)
		b.Labels = d.noLabels
	default:
		b.Label, b.Labels, err = d.indices(colLabel, vals[colLabel], b.Label)
	}
	return err
}

// indices widens dictionary column c's indices (v, one or four bytes
// each) into dst, checking each against the dictionary. A column not
// decoded (v nil) gives nil.
func (d *decoder) indices(c int, v []byte, dst []int32) ([]int32, []string, error) {
	strs := d.dicts[d.cols[c].dict]
	if v == nil {
		return nil, strs, nil
	}
	var bad int64
	ok := true
	switch d.cols[c].width {
	case 1:
		dst = grow(dst, len(v))
		for j, k := range v {
			dst[j] = int32(int8(k))
			if int(int8(k)) >= len(strs) || int8(k) < 0 {
				bad, ok = int64(int8(k)), false
			}
		}
	case 4:
		src := view[int32](v)
		dst = grow(dst, len(src))
		copy(dst, src)
		for _, k := range src {
			if int(k) >= len(strs) || k < 0 {
				bad, ok = int64(k), false
			}
		}
	}
	if !ok {
		return nil, nil, fmt.Errorf("column %s: dictionary index %d out of %d values", fields[c].Name, bad, len(strs))
	}
	if c == 1 && len(d.kinds) != len(strs) {
		return nil, nil, fmt.Errorf("column %s: the kind dictionary was not parsed", fields[c].Name)
	}
	return dst, strs, nil
}

// view returns b's bytes as a slice of T without copying. Arrow data is
// little-endian and padded to 8 bytes; on a big-endian host, or for a
// buffer a foreign writer left unaligned, the values are copied instead.
// A nil b gives nil.
func view[T int32 | int64 | float64](b []byte) []T {
	if b == nil {
		return nil
	}
	var zero T
	size := int(unsafe.Sizeof(zero))
	n := len(b) / size
	if n == 0 {
		return []T{}
	}
	if littleEndian() && uintptr(unsafe.Pointer(&b[0]))%uintptr(size) == 0 {
		return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
	}
	out := make([]T, n)
	switch o := any(out).(type) {
	case []int32:
		for j := range o {
			o[j] = int32(binary.LittleEndian.Uint32(b[4*j:]))
		}
	case []int64:
		for j := range o {
			o[j] = int64(binary.LittleEndian.Uint64(b[8*j:]))
		}
	case []float64:
		for j := range o {
			o[j] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*j:]))
		}
	}
	return out
}

// littleEndian reports whether this host is little-endian, where Arrow's
// buffers can be used as they are.
func littleEndian() bool { return binary.NativeEndian.Uint16([]byte{1, 0}) == 1 }

// lz4Frames decompresses the LZ4 frames in src (Arrow's LZ4_FRAME codec)
// into dst, whose capacity is the size the buffer declared: nothing is
// written past it. Block and content checksums are skipped, not checked.
func lz4Frames(src, dst []byte) ([]byte, error) {
	errCorrupt := errors.New("corrupt lz4 frame")
	for len(src) > 0 {
		if len(src) < 7 {
			return nil, errCorrupt
		}
		magic := binary.LittleEndian.Uint32(src)
		if magic&0xFFFFFFF0 == 0x184D2A50 { // a skippable frame
			if len(src) < 8 {
				return nil, errCorrupt
			}
			n := uint64(binary.LittleEndian.Uint32(src[4:]))
			if n > uint64(len(src)-8) {
				return nil, errCorrupt
			}
			src = src[8+n:]
			continue
		}
		flg := src[4]
		if magic != 0x184D2204 || flg>>6 != 1 {
			return nil, errCorrupt
		}
		indep, blockSum, contentSum := flg&0x20 != 0, flg&0x10 != 0, flg&0x04 != 0
		hdr := 7 // magic, FLG, BD, HC
		if flg&0x08 != 0 {
			hdr += 8 // content size
		}
		if flg&0x01 != 0 {
			hdr += 4 // dictionary id
		}
		if len(src) < hdr {
			return nil, errCorrupt
		}
		src = src[hdr:]
		for {
			if len(src) < 4 {
				return nil, errCorrupt
			}
			v := binary.LittleEndian.Uint32(src)
			src = src[4:]
			if v == 0 { // end mark
				break
			}
			n := int(v & 0x7FFFFFFF)
			if n > len(src) {
				return nil, errCorrupt
			}
			block := src[:n]
			src = src[n:]
			if v&0x80000000 != 0 { // stored
				if len(block) > cap(dst)-len(dst) {
					return nil, errCorrupt
				}
				dst = append(dst, block...)
			} else {
				var m int
				var err error
				room := dst[len(dst):cap(dst)]
				if indep || len(dst) == 0 {
					m, err = lz4.UncompressBlock(block, room)
				} else {
					m, err = lz4.UncompressBlockWithDict(block, room, dst[max(0, len(dst)-64<<10):])
				}
				if err != nil {
					return nil, err
				}
				dst = dst[:len(dst)+m]
			}
			if blockSum {
				if len(src) < 4 {
					return nil, errCorrupt
				}
				src = src[4:]
			}
		}
		if contentSum {
			if len(src) < 4 {
				return nil, errCorrupt
			}
			src = src[4:]
		}
	}
	return dst, nil
}
