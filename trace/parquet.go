package trace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/arrow/go/v15/arrow"
	"github.com/apache/arrow/go/v15/parquet"
	"github.com/apache/arrow/go/v15/parquet/compress"
	"github.com/apache/arrow/go/v15/parquet/file"
	"github.com/apache/arrow/go/v15/parquet/metadata"
	pqschema "github.com/apache/arrow/go/v15/parquet/schema"
)

// Columns of the Parquet export besides the trace's own (docs/export.md):
// the host the rank ran on, the run's world size and its id, the same on
// every row of a file (Parquet stores such a column in a few bytes), so
// that a query can group by host, knows the world a collective ran on,
// and exports of several runs can be queried as one table.
const (
	ColHost      = "host"
	ColWorldSize = "world_size"
	ColRunID     = "run_id"
)

// ParquetRowGroupRows is the default bound on a Parquet row group's rows:
// what the writer holds in memory (encoded and compressed) before it
// writes the group out, and the unit engines read in parallel.
const ParquetRowGroupRows = 1 << 18

// ParquetOptions configure WriteParquet.
type ParquetOptions struct {
	// RowGroupRows bounds each row group; 0 means ParquetRowGroupRows.
	RowGroupRows int
}

// ParquetColumns returns the columns of an exported Parquet file, in
// order: every column of the v1 schema but rank, which the file's Hive
// partition (rank=N) holds, then host, world_size and run_id.
func ParquetColumns() []string {
	var out []string
	for _, f := range parquetFields {
		out = append(out, f.Name)
	}
	return out
}

// parquetFields are the Parquet export's columns: the trace's, with its
// dictionary strings as plain strings (Parquet dictionary-encodes them
// itself), without rank.
var parquetFields = func() []arrow.Field {
	var out []arrow.Field
	for _, f := range fields {
		if f.Name == ColRank {
			continue
		}
		if _, ok := f.Type.(*arrow.DictionaryType); ok {
			f.Type = arrow.BinaryTypes.String
		}
		out = append(out, f)
	}
	return append(out, arrow.Field{Name: ColHost, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: ColWorldSize, Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: ColRunID, Type: arrow.BinaryTypes.String})
}()

// WriteParquet writes stream i of the run to w as one Parquet file: every
// event, in the stream's order, with start_ns on the aligned clock as
// ScanStream gives it, in row groups of at most opt.RowGroupRows rows, so
// that memory is bounded by a row group whatever the stream's length. The
// file's key-value metadata holds the rank, world size, host, run id and
// format version under the trace's metadata keys. The world size is the
// run's (RunFiles.WorldSize), as the analyses count it.
//
// It returns the rows written and the stream's facts. A cut stream is
// written whole up to the cut, a valid file, and the error then wraps a
// *TruncatedError (errors.Is(err, ErrTruncated)); a stream cut before its
// schema writes nothing and says so the same way. Any other error leaves
// w holding an incomplete file. It stops with ctx's error once ctx is
// done.
func (r *RunFiles) WriteParquet(ctx context.Context, i int, w io.Writer, opt ParquetOptions) (rows int64, info RankInfo, err error) {
	if opt.RowGroupRows <= 0 {
		opt.RowGroupRows = ParquetRowGroupRows
	}
	pw := &parquetWriter{}
	defer pw.release()
	err = r.scanStream(i, nil, func(in RankInfo) error {
		info = in
		return pw.open(w, in, r.runID(in), r.WorldSize(), opt.RowGroupRows)
	}, nil, func(_ RankInfo, b *Batch) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return pw.add(b)
	})
	if pw.fw == nil {
		return 0, info, err
	}
	if err != nil && !errors.Is(err, ErrTruncated) {
		return pw.rows, info, err
	}
	if cerr := pw.close(); cerr != nil {
		return pw.rows, info, fmt.Errorf("writing rank %d as Parquet: %w", info.Rank, cerr)
	}
	return pw.rows, info, err
}

// runID is the run's id: the manifest's, else the stream's.
func (r *RunFiles) runID(info RankInfo) string {
	if r.Manifest != nil && r.Manifest.RunID != "" {
		return r.Manifest.RunID
	}
	return info.RunID
}

// parquetWriter writes trace batches straight into the column writers of
// buffered row groups, closing a group each RowGroupRows rows. It uses
// Arrow's Parquet file writer, not its Arrow-record layer (pqarrow), which
// would link Arrow Flight and gRPC into every commprof binary (28 MB more)
// for nothing a flat table of events needs.
type parquetWriter struct {
	fw        *file.Writer
	rgw       file.BufferedRowGroupWriter
	rowGroup  int
	groupRows int
	rows      int64
	host, run parquet.ByteArray
	world     int32
	closed    bool
	// scratch, reused batch to batch
	bas   []parquet.ByteArray
	i32   []int32
	dict  []parquet.ByteArray
	kinds [256]parquet.ByteArray
}

// parquetSchema is the file's schema: parquetFields as required Parquet
// columns (strings as UTF-8 byte arrays) under a required root.
func parquetSchema() (*pqschema.GroupNode, error) {
	var nodes pqschema.FieldList
	for _, f := range parquetFields {
		switch f.Type.ID() {
		case arrow.STRING:
			n, err := pqschema.NewPrimitiveNodeLogical(f.Name, parquet.Repetitions.Required, pqschema.StringLogicalType{}, parquet.Types.ByteArray, -1, -1)
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, n)
		case arrow.INT64:
			nodes = append(nodes, pqschema.NewInt64Node(f.Name, parquet.Repetitions.Required, -1))
		case arrow.INT32:
			nodes = append(nodes, pqschema.NewInt32Node(f.Name, parquet.Repetitions.Required, -1))
		case arrow.FLOAT64:
			nodes = append(nodes, pqschema.NewFloat64Node(f.Name, parquet.Repetitions.Required, -1))
		default:
			return nil, fmt.Errorf("trace: no Parquet type for column %s (%s)", f.Name, f.Type)
		}
	}
	return pqschema.NewGroupNode("schema", parquet.Repetitions.Required, nodes, -1)
}

func (p *parquetWriter) open(w io.Writer, info RankInfo, runID string, world, rowGroup int) error {
	root, err := parquetSchema()
	if err != nil {
		return err
	}
	kv := metadata.KeyValueMetadata{}
	for _, e := range [][2]string{{MetaVersion, strconv.Itoa(FormatVersion)}, {MetaRank, strconv.Itoa(info.Rank)},
		{MetaWorldSize, strconv.Itoa(world)}, {MetaHost, info.Host}, {MetaRunID, runID}} {
		if err := kv.Append(e[0], e[1]); err != nil {
			return err
		}
	}
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithMaxRowGroupLength(int64(rowGroup)),
		parquet.WithCreatedBy("commprof"),
		// Times and values rarely repeat: a dictionary would be built and
		// thrown away for every page.
		parquet.WithDictionaryFor(ColStart, false),
		parquet.WithDictionaryFor(ColDur, false),
		parquet.WithDictionaryFor(ColWait, false),
		parquet.WithDictionaryFor(ColValue, false),
	)
	p.fw = file.NewParquetWriter(w, root, file.WithWriterProps(props), file.WithWriteMetadata(kv))
	p.rowGroup, p.host, p.run, p.world = rowGroup, parquet.ByteArray(info.Host), parquet.ByteArray(runID), int32(world)
	return nil
}

// add writes a batch's rows, closing the row group each rowGroup rows.
func (p *parquetWriter) add(b *Batch) error {
	for lo := 0; lo < b.Len; {
		if p.rgw == nil {
			p.rgw, p.groupRows = p.fw.AppendBufferedRowGroup(), 0
		}
		hi := min(b.Len, lo+p.rowGroup-p.groupRows)
		if err := p.write(b, lo, hi); err != nil {
			return err
		}
		p.groupRows += hi - lo
		p.rows += int64(hi - lo)
		lo = hi
		if p.groupRows >= p.rowGroup {
			err := p.rgw.Close()
			p.rgw = nil
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// write writes rows [lo, hi) of b into the current row group, column by
// column in parquetFields' order.
func (p *parquetWriter) write(b *Batch, lo, hi int) error {
	n := hi - lo
	col := 0
	next := func() (file.ColumnChunkWriter, error) {
		cw, err := p.rgw.Column(col)
		col++
		return cw, err
	}
	bytesCol := func(vals []parquet.ByteArray) error {
		cw, err := next()
		if err == nil {
			_, err = cw.(*file.ByteArrayColumnChunkWriter).WriteBatch(vals, nil, nil)
		}
		return err
	}
	str := func(idx []int32, dict []string) error {
		p.bas = p.bas[:0]
		if idx == nil { // an optional column the stream lacks
			for range n {
				p.bas = append(p.bas, parquet.ByteArray{})
			}
			return bytesCol(p.bas)
		}
		p.dict = p.dict[:0]
		for _, s := range dict {
			p.dict = append(p.dict, parquet.ByteArray(s))
		}
		for _, k := range idx[lo:hi] {
			p.bas = append(p.bas, p.dict[k])
		}
		return bytesCol(p.bas)
	}
	constant := func(v parquet.ByteArray) error {
		p.bas = p.bas[:0]
		for range n {
			p.bas = append(p.bas, v)
		}
		return bytesCol(p.bas)
	}
	i64 := func(v []int64) error {
		cw, err := next()
		if err == nil {
			_, err = cw.(*file.Int64ColumnChunkWriter).WriteBatch(v[lo:hi], nil, nil)
		}
		return err
	}
	i32 := func(v []int32) error {
		cw, err := next()
		if err == nil {
			_, err = cw.(*file.Int32ColumnChunkWriter).WriteBatch(v[lo:hi], nil, nil)
		}
		return err
	}
	p.bas = p.bas[:0]
	for _, k := range b.Kind[lo:hi] {
		if p.kinds[k] == nil {
			p.kinds[k] = parquet.ByteArray(k.String())
		}
		p.bas = append(p.bas, p.kinds[k])
	}
	if err := bytesCol(p.bas); err != nil {
		return err
	}
	p.i32 = p.i32[:0]
	for range n {
		p.i32 = append(p.i32, p.world)
	}
	for _, f := range []func() error{
		func() error { return str(b.Name, b.Names) },
		func() error { return i64(b.Start) },
		func() error { return i64(b.Dur) },
		func() error { return i64(b.Bytes) },
		func() error { return i32(b.Peer) },
		func() error { return i64(b.Seq) },
		func() error { return i32(b.Step) },
		func() error { return str(b.Algo, b.Algos) },
		func() error { return str(b.DType, b.DTypes) },
		func() error { return i32(b.Root) },
		func() error { return i32(b.Chunk) },
		func() error { return str(b.Comm, b.Comms) },
		func() error { return i64(b.Wait) },
		func() error {
			cw, err := next()
			if err == nil {
				_, err = cw.(*file.Float64ColumnChunkWriter).WriteBatch(b.Value[lo:hi], nil, nil)
			}
			return err
		},
		func() error { return str(b.Label, b.Labels) },
		func() error { return constant(p.host) },
		func() error {
			cw, err := next()
			if err == nil {
				_, err = cw.(*file.Int32ColumnChunkWriter).WriteBatch(p.i32, nil, nil)
			}
			return err
		},
		func() error { return constant(p.run) },
	} {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

func (p *parquetWriter) close() error {
	p.closed = true
	if p.rgw != nil {
		if err := p.rgw.Close(); err != nil {
			return err
		}
		p.rgw = nil
	}
	return p.fw.Close()
}

// release closes the writer of a failed write: the file is being
// abandoned, only its buffers matter.
func (p *parquetWriter) release() {
	if p.fw != nil && !p.closed {
		p.closed = true
		_ = p.fw.Close()
	}
}
