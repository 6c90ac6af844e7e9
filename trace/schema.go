package trace

import (
	"fmt"
	"strconv"

	"github.com/apache/arrow/go/v15/arrow"
)

// Column names of the v1 schema, in order.
const (
	ColRank  = "rank"
	ColKind  = "kind"
	ColName  = "name"
	ColStart = "start_ns"
	ColDur   = "dur_ns"
	ColBytes = "bytes"
	ColPeer  = "peer"
	ColSeq   = "seq"
	ColStep  = "step"
	ColAlgo  = "algo"
	ColDType = "dtype"
	ColRoot  = "root"
	ColChunk = "chunk"
	ColComm  = "comm"
	ColWait  = "wait_ns"
	ColValue = "value"
	// ColLabel is optional: streams written before it, or by writers that
	// do not know it, read with Label "" on every row.
	ColLabel = "label"
)

// Schema metadata keys.
const (
	MetaVersion     = "commprof.format_version"
	MetaRank        = "commprof.rank"
	MetaWorldSize   = "commprof.world_size"
	MetaHost        = "commprof.host"
	MetaPID         = "commprof.pid"
	MetaClockOffset = "commprof.clock_offset_ns"
	MetaRunID       = "commprof.run_id"
)

func dict(index arrow.DataType) arrow.DataType {
	return &arrow.DictionaryType{IndexType: index, ValueType: arrow.BinaryTypes.String}
}

var fields = []arrow.Field{
	{Name: ColRank, Type: arrow.PrimitiveTypes.Int32},
	{Name: ColKind, Type: dict(arrow.PrimitiveTypes.Int8)},
	{Name: ColName, Type: dict(arrow.PrimitiveTypes.Int32)},
	{Name: ColStart, Type: arrow.PrimitiveTypes.Int64},
	{Name: ColDur, Type: arrow.PrimitiveTypes.Int64},
	{Name: ColBytes, Type: arrow.PrimitiveTypes.Int64},
	{Name: ColPeer, Type: arrow.PrimitiveTypes.Int32},
	{Name: ColSeq, Type: arrow.PrimitiveTypes.Int64},
	{Name: ColStep, Type: arrow.PrimitiveTypes.Int32},
	{Name: ColAlgo, Type: dict(arrow.PrimitiveTypes.Int8)},
	{Name: ColDType, Type: dict(arrow.PrimitiveTypes.Int8)},
	{Name: ColRoot, Type: arrow.PrimitiveTypes.Int32},
	{Name: ColChunk, Type: arrow.PrimitiveTypes.Int32},
	{Name: ColComm, Type: dict(arrow.PrimitiveTypes.Int32)},
	{Name: ColWait, Type: arrow.PrimitiveTypes.Int64},
	{Name: ColValue, Type: arrow.PrimitiveTypes.Float64},
	{Name: ColLabel, Type: dict(arrow.PrimitiveTypes.Int32)},
}

// colLabel is the label column's index in fields; fields from numRequired
// on may be absent from a stream.
const (
	colLabel    = 16
	numRequired = 16
)

// RankInfo holds the per-rank facts kept in a stream's schema metadata.
type RankInfo struct {
	Rank          int
	WorldSize     int
	Host          string
	PID           int
	ClockOffsetNS int64 // add to Start to move this rank's times onto rank 0's clock
	RunID         string
}

// schema returns the v1 schema with info in its metadata.
func schema(info RankInfo) *arrow.Schema {
	md := arrow.NewMetadata(
		[]string{MetaVersion, MetaRank, MetaWorldSize, MetaHost, MetaPID, MetaClockOffset, MetaRunID},
		[]string{strconv.Itoa(FormatVersion), strconv.Itoa(info.Rank), strconv.Itoa(info.WorldSize), info.Host,
			strconv.Itoa(info.PID), strconv.FormatInt(info.ClockOffsetNS, 10), info.RunID},
	)
	return arrow.NewSchema(fields, &md)
}

// columns maps each v1 column to its index in a stream's schema, checking
// names and types: a stream may carry more columns, but not fewer
// required ones, and none of another type. An optional column the stream
// lacks maps to -1.
func columns(s *arrow.Schema) ([numCols]int, error) {
	var idx [numCols]int
	for i, f := range fields {
		j := s.FieldIndices(f.Name)
		if len(j) == 0 && i >= numRequired {
			idx[i] = -1
			continue
		}
		if len(j) == 0 {
			return idx, fmt.Errorf("%w: no %q column", ErrNotTrace, f.Name)
		}
		got := s.Field(j[0]).Type
		if !arrow.TypeEqual(got, f.Type) {
			return idx, fmt.Errorf("%w: column %q is %s, want %s", ErrNotTrace, f.Name, got, f.Type)
		}
		idx[i] = j[0]
	}
	return idx, nil
}

// numCols is the number of v1 columns, optional ones included.
const numCols = 17

func infoFrom(s *arrow.Schema) (RankInfo, error) {
	md := s.Metadata()
	get := func(k string) (string, bool) {
		i := md.FindKey(k)
		if i < 0 {
			return "", false
		}
		return md.Values()[i], true
	}
	v, ok := get(MetaVersion)
	if !ok {
		return RankInfo{}, fmt.Errorf("%w: no %s in the schema metadata", ErrNotTrace, MetaVersion)
	}
	if v != strconv.Itoa(FormatVersion) {
		return RankInfo{}, fmt.Errorf("%w: format version %q, this commprof reads version %d", ErrVersion, v, FormatVersion)
	}
	var info RankInfo
	var err error
	num := func(k string, dst *int) {
		s, _ := get(k)
		if n, e := strconv.Atoi(s); e == nil {
			*dst = n
		} else if err == nil {
			err = fmt.Errorf("%w: metadata %s=%q is not a number", ErrNotTrace, k, s)
		}
	}
	num(MetaRank, &info.Rank)
	num(MetaWorldSize, &info.WorldSize)
	num(MetaPID, &info.PID)
	off, _ := get(MetaClockOffset)
	if info.ClockOffsetNS, _ = strconv.ParseInt(off, 10, 64); err == nil && off != "" && strconv.FormatInt(info.ClockOffsetNS, 10) != off {
		err = fmt.Errorf("%w: metadata %s=%q is not a number", ErrNotTrace, MetaClockOffset, off)
	}
	if err == nil && (info.ClockOffsetNS < -maxClockOffset || info.ClockOffsetNS > maxClockOffset) {
		err = fmt.Errorf("%w: metadata %s=%d ns, beyond the ±2^60 ns a clock offset can be", ErrNotTrace, MetaClockOffset, info.ClockOffsetNS)
	}
	info.Host, _ = get(MetaHost)
	info.RunID, _ = get(MetaRunID)
	if err == nil && (info.WorldSize < 1 || info.WorldSize > MaxWorldSize || info.Rank < 0 || info.Rank >= info.WorldSize) {
		err = fmt.Errorf("%w: rank %d of %d in the metadata (a world holds 1 to %d ranks)", ErrNotTrace, info.Rank, info.WorldSize, MaxWorldSize)
	}
	return info, err
}
