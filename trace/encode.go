package trace

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"unsafe"

	flatbuffers "github.com/google/flatbuffers/go"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// encoder writes a stream's dictionary and record batch messages in the
// Arrow IPC format, the mirror of decoder; Arrow's writer makes the
// schema message (NewWriter). Arrow Go v15's writer makes a new zstd
// encoder for every batch, which took twice as long as the compression
// itself; this one keeps one per stream and reuses its buffers, so that a
// batch allocates nothing.
type encoder struct {
	w     io.Writer
	codec Codec
	zstd  *zstd.Encoder
	lz4   *lz4.Writer
	lzOut bytes.Buffer
	fbb   *flatbuffers.Builder
	body  []byte
	frame []byte
	nodes [][2]int64 // a batch's field nodes: length, null count
	bufs  [][2]int64 // and buffers: offset, length in the body
	err   error      // the first compression error of the message being built
}

// Arrow IPC constants the encoder writes.
const (
	metadataV5     = 4
	bodyCompBuffer = 0 // BodyCompressionMethod BUFFER
)

func newEncoder(w io.Writer, codec Codec, level Level) (*encoder, error) {
	e := &encoder{w: w, codec: codec, fbb: flatbuffers.NewBuilder(2048)}
	switch codec {
	case Zstd:
		zl := zstd.SpeedDefault
		if level == LevelSmallest {
			zl = zstd.SpeedBestCompression
		}
		// Each buffer is compressed on its own, and a column of a batch
		// of 65536 events is 512 KiB: a 1 MiB window holds any of them
		// whole, and with the smaller tables the smallest level holds
		// about 38 MB instead of 54 (every rank of a machine compacts as
		// it ends), for the same bytes.
		enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zl),
			zstd.WithLowerEncoderMem(true), zstd.WithWindowSize(1<<20))
		if err != nil {
			return nil, err
		}
		e.zstd = enc
	case LZ4:
		e.lz4 = lz4.NewWriter(nil)
	}
	return e, nil
}

// buffer appends one buffer to the body, compressed as the codec says,
// at an 8-byte aligned offset. A buffer that compression would not make
// smaller (a dictionary's few strings, a short batch's column) is stored
// as it is, behind the length -1 that Arrow readers take to mean so.
func (e *encoder) buffer(data []byte) {
	for len(e.body)%8 != 0 {
		e.body = append(e.body, 0)
	}
	off := len(e.body)
	switch {
	case len(data) == 0:
	case e.codec == Zstd:
		e.body = binary.LittleEndian.AppendUint64(e.body, uint64(len(data)))
		e.body = e.zstd.EncodeAll(data, e.body)
		if len(e.body)-off-8 >= len(data) {
			e.body = binary.LittleEndian.AppendUint64(e.body[:off], math.MaxUint64) // -1
			e.body = append(e.body, data...)
		}
	case e.codec == LZ4:
		e.lzOut.Reset()
		e.lz4.Reset(&e.lzOut)
		_, err := e.lz4.Write(data)
		if err == nil {
			err = e.lz4.Close()
		}
		if err != nil && e.err == nil {
			e.err = fmt.Errorf("lz4: %w", err)
		}
		if e.lzOut.Len() < len(data) {
			e.body = binary.LittleEndian.AppendUint64(e.body, uint64(len(data)))
			e.body = append(e.body, e.lzOut.Bytes()...)
		} else {
			e.body = binary.LittleEndian.AppendUint64(e.body, math.MaxUint64) // -1: stored as it is
			e.body = append(e.body, data...)
		}
	default:
		e.body = append(e.body, data...)
	}
	e.bufs = append(e.bufs, [2]int64{int64(off), int64(len(e.body) - off)})
}

// column adds a field without nulls whose values are data.
func (e *encoder) column(rows int, data []byte) {
	e.nodes = append(e.nodes, [2]int64{int64(rows), 0})
	e.buffer(nil) // no validity bitmap: no nulls
	e.buffer(data)
}

func (e *encoder) reset() {
	e.body, e.nodes, e.bufs, e.err = e.body[:0], e.nodes[:0], e.bufs[:0], nil
	e.fbb.Reset()
}

// recordBatch builds the RecordBatch table of the nodes and buffers added.
func (e *encoder) recordBatch(rows int) flatbuffers.UOffsetT {
	b := e.fbb
	b.StartVector(16, len(e.bufs), 8)
	for i := len(e.bufs) - 1; i >= 0; i-- {
		b.PrependInt64(e.bufs[i][1])
		b.PrependInt64(e.bufs[i][0])
	}
	bufs := b.EndVector(len(e.bufs))
	b.StartVector(16, len(e.nodes), 8)
	for i := len(e.nodes) - 1; i >= 0; i-- {
		b.PrependInt64(e.nodes[i][1])
		b.PrependInt64(e.nodes[i][0])
	}
	nodes := b.EndVector(len(e.nodes))
	var comp flatbuffers.UOffsetT
	if e.codec != None {
		codec := int8(codecLZ4)
		if e.codec == Zstd {
			codec = codecZstd
		}
		b.StartObject(2)
		b.PrependInt8Slot(0, codec, codecLZ4)
		b.PrependInt8Slot(1, bodyCompBuffer, bodyCompBuffer)
		comp = b.EndObject()
	}
	b.StartObject(5)
	b.PrependInt64Slot(0, int64(rows), 0)
	b.PrependUOffsetTSlot(1, nodes, 0)
	b.PrependUOffsetTSlot(2, bufs, 0)
	if comp != 0 {
		b.PrependUOffsetTSlot(3, comp, 0)
	}
	return b.EndObject()
}

// message writes a message whose header (of type kind) was built last,
// followed by the body.
func (e *encoder) message(kind byte, header flatbuffers.UOffsetT) error {
	if e.err != nil {
		return e.err
	}
	for len(e.body)%8 != 0 {
		e.body = append(e.body, 0)
	}
	b := e.fbb
	b.StartObject(5)
	b.PrependInt16Slot(0, metadataV5, 0)
	b.PrependByteSlot(1, kind, 0)
	b.PrependUOffsetTSlot(2, header, 0)
	b.PrependInt64Slot(3, int64(len(e.body)), 0)
	b.Finish(b.EndObject())
	meta := b.FinishedBytes()
	// The metadata is padded so that the body starts 8-byte aligned.
	n := (len(meta) + 7) &^ 7
	e.frame = binary.LittleEndian.AppendUint32(e.frame[:0], 0xFFFFFFFF)
	e.frame = binary.LittleEndian.AppendUint32(e.frame, uint32(n))
	e.frame = append(e.frame, meta...)
	for len(e.frame) < 8+n {
		e.frame = append(e.frame, 0)
	}
	if _, err := e.w.Write(e.frame); err != nil {
		return err
	}
	_, err := e.w.Write(e.body)
	return err
}

// dictionary writes the values of dictionary id: all of them, or (delta)
// those added since the last.
func (e *encoder) dictionary(id int64, values []string, delta bool) error {
	e.reset()
	offs := make([]byte, 0, 4*(len(values)+1))
	var data []byte
	offs = binary.LittleEndian.AppendUint32(offs, 0)
	for _, v := range values {
		if len(data)+len(v) > math.MaxInt32 {
			return fmt.Errorf("trace: dictionary %d holds more than 2 GiB of strings", id)
		}
		data = append(data, v...)
		offs = binary.LittleEndian.AppendUint32(offs, uint32(len(data)))
	}
	e.nodes = append(e.nodes, [2]int64{int64(len(values)), 0})
	e.buffer(nil)
	e.buffer(offs)
	e.buffer(data)
	rb := e.recordBatch(len(values))
	b := e.fbb
	b.StartObject(3)
	b.PrependInt64Slot(0, id, 0)
	b.PrependUOffsetTSlot(1, rb, 0)
	b.PrependBoolSlot(2, delta, false)
	return e.message(msgDictionaryBatch, b.EndObject())
}

// close writes the end-of-stream marker.
func (e *encoder) close() error {
	if e.zstd != nil {
		defer e.zstd.Close()
	}
	_, err := e.w.Write([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0, 0})
	return err
}

// bytesOf returns s's memory as little-endian bytes: the slice itself on a
// little-endian host, a converted copy on a big-endian one.
func bytesOf[T int8 | int32 | int64 | float64](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	size := int(unsafe.Sizeof(zero))
	if littleEndian() || size == 1 {
		return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*size)
	}
	out := make([]byte, 0, len(s)*size)
	for _, v := range s {
		switch x := any(v).(type) {
		case int32:
			out = binary.LittleEndian.AppendUint32(out, uint32(x))
		case int64:
			out = binary.LittleEndian.AppendUint64(out, uint64(x))
		case float64:
			out = binary.LittleEndian.AppendUint64(out, math.Float64bits(x))
		}
	}
	return out
}
