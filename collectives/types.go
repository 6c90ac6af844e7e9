package collectives

import (
	"fmt"
	"unsafe"

	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/blas64"
)

// DType is the element type of a Buffer.
type DType uint8

// Element types.
const (
	Float32 DType = iota + 1
	Float64
	Int32
	Int64
)

// Size returns the size of one element in bytes.
func (d DType) Size() int {
	switch d {
	case Float32, Int32:
		return 4
	case Float64, Int64:
		return 8
	}
	return 0
}

func (d DType) String() string {
	switch d {
	case Float32:
		return "float32"
	case Float64:
		return "float64"
	case Int32:
		return "int32"
	case Int64:
		return "int64"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// ParseDType parses a dtype name as printed by DType.String.
func ParseDType(s string) (DType, error) {
	for _, d := range []DType{Float32, Float64, Int32, Int64} {
		if d.String() == s {
			return d, nil
		}
	}
	return 0, fmt.Errorf("unknown data type %q (want float32, float64, int32 or int64)", s)
}

// ReduceOp is the reduction applied by AllReduce, Reduce and ReduceScatter.
type ReduceOp uint8

// Reductions.
const (
	Sum ReduceOp = iota + 1
	Max
	Min
	Prod
)

func (o ReduceOp) String() string {
	switch o {
	case Sum:
		return "sum"
	case Max:
		return "max"
	case Min:
		return "min"
	case Prod:
		return "prod"
	}
	return fmt.Sprintf("reduceop(%d)", uint8(o))
}

// ParseReduceOp parses a reduction name as printed by ReduceOp.String.
func ParseReduceOp(s string) (ReduceOp, error) {
	for _, o := range []ReduceOp{Sum, Max, Min, Prod} {
		if o.String() == s {
			return o, nil
		}
	}
	return 0, fmt.Errorf("unknown reduction %q (want sum, max, min or prod)", s)
}

// Buffer is a typed view of memory that collectives read and write in place.
// It never copies: Float32s(x) shares x's memory.
type Buffer struct {
	b     []byte
	dtype DType
}

func view[T any](x []T) []byte {
	if len(x) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), len(x)*int(unsafe.Sizeof(zero)))
}

// Float32s returns a Buffer viewing x.
func Float32s(x []float32) Buffer { return Buffer{view(x), Float32} }

// Float64s returns a Buffer viewing x.
func Float64s(x []float64) Buffer { return Buffer{view(x), Float64} }

// Int32s returns a Buffer viewing x.
func Int32s(x []int32) Buffer { return Buffer{view(x), Int32} }

// Int64s returns a Buffer viewing x.
func Int64s(x []int64) Buffer { return Buffer{view(x), Int64} }

// NewBuffer allocates a zeroed Buffer of n elements of type d.
func NewBuffer(d DType, n int) Buffer {
	switch d {
	case Float32:
		return Float32s(make([]float32, n))
	case Float64:
		return Float64s(make([]float64, n))
	case Int32:
		return Int32s(make([]int32, n))
	case Int64:
		return Int64s(make([]int64, n))
	}
	panic(fmt.Sprintf("collectives: NewBuffer with invalid %v", d))
}

// Len returns the number of elements.
func (b Buffer) Len() int {
	if b.dtype == 0 {
		return 0
	}
	return len(b.b) / b.dtype.Size()
}

// Bytes returns the buffer's memory. Writing to it writes to the buffer.
func (b Buffer) Bytes() []byte { return b.b }

// DType returns the element type.
func (b Buffer) DType() DType { return b.dtype }

// Slice returns the elements [lo, hi) as a Buffer sharing memory with b.
func (b Buffer) Slice(lo, hi int) Buffer {
	s := b.dtype.Size()
	return Buffer{b.b[lo*s : hi*s], b.dtype}
}

// Float32s returns the buffer as a []float32 sharing its memory; it panics if
// the buffer holds another type.
func (b Buffer) Float32s() []float32 { return typed[float32](b, Float32) }

// Float64s returns the buffer as a []float64 sharing its memory; it panics if
// the buffer holds another type.
func (b Buffer) Float64s() []float64 { return typed[float64](b, Float64) }

// Int32s returns the buffer as a []int32 sharing its memory.
func (b Buffer) Int32s() []int32 { return typed[int32](b, Int32) }

// Int64s returns the buffer as a []int64 sharing its memory.
func (b Buffer) Int64s() []int64 { return typed[int64](b, Int64) }

func typed[T any](b Buffer, d DType) []T {
	if b.dtype != d {
		panic(fmt.Sprintf("collectives: %v buffer used as %v", b.dtype, d))
	}
	return cast[T](b.b)
}

func cast[T any](p []byte) []T {
	if len(p) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*T)(unsafe.Pointer(&p[0])), len(p)/int(unsafe.Sizeof(zero)))
}

type number interface {
	~float32 | ~float64 | ~int32 | ~int64
}

// reduceInto sets dst[i] = dst[i] op src[i]. dst and src hold elements of
// type d and have the same length.
func reduceInto(dst, src []byte, d DType, op ReduceOp) {
	switch d {
	case Float32:
		reduceT(cast[float32](dst), cast[float32](src), op)
	case Float64:
		reduceT(cast[float64](dst), cast[float64](src), op)
	case Int32:
		reduceT(cast[int32](dst), cast[int32](src), op)
	case Int64:
		reduceT(cast[int64](dst), cast[int64](src), op)
	default:
		panic(fmt.Sprintf("collectives: reduce with invalid %v", d))
	}
}

func reduceT[T number](d, s []T, op ReduceOp) {
	s = s[:len(d)]
	switch op {
	case Sum:
		// gonum's assembly kernels add float32 and float64 about twice as
		// fast as a Go loop; y += 1·x is exact, so results do not change.
		switch d := any(d).(type) {
		case []float32:
			blas32.Axpy(1, blas32.Vector{N: len(d), Inc: 1, Data: any(s).([]float32)}, blas32.Vector{N: len(d), Inc: 1, Data: d})
			return
		case []float64:
			blas64.Axpy(1, blas64.Vector{N: len(d), Inc: 1, Data: any(s).([]float64)}, blas64.Vector{N: len(d), Inc: 1, Data: d})
			return
		}
		i := 0
		for ; i+4 <= len(d); i += 4 {
			d0, s0 := d[i:i+4:i+4], s[i:i+4:i+4]
			d0[0] += s0[0]
			d0[1] += s0[1]
			d0[2] += s0[2]
			d0[3] += s0[3]
		}
		for ; i < len(d); i++ {
			d[i] += s[i]
		}
	case Prod:
		for i := range d {
			d[i] *= s[i]
		}
	case Max:
		for i := range d {
			if s[i] > d[i] {
				d[i] = s[i]
			}
		}
	case Min:
		for i := range d {
			if s[i] < d[i] {
				d[i] = s[i]
			}
		}
	default:
		panic(fmt.Sprintf("collectives: invalid %v", op))
	}
}

// Op names a collective operation.
type Op uint8

// Operations. OpSendRecv marks user point-to-point messages.
const (
	OpAllReduce Op = iota + 1
	OpBroadcast
	OpReduce
	OpAllGather
	OpReduceScatter
	OpBarrier
	OpSendRecv
	OpSplit
)

var opNames = [...]string{
	OpAllReduce:     "allreduce",
	OpBroadcast:     "broadcast",
	OpReduce:        "reduce",
	OpAllGather:     "allgather",
	OpReduceScatter: "reducescatter",
	OpBarrier:       "barrier",
	OpSendRecv:      "sendrecv",
	OpSplit:         "split",
}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// ParseOp parses an operation name as printed by Op.String.
func ParseOp(s string) (Op, error) {
	for i, n := range opNames {
		if n != "" && n == s {
			return Op(i), nil
		}
	}
	return 0, fmt.Errorf("unknown collective %q (want allreduce, broadcast, reduce, allgather or reducescatter)", s)
}

// Algo names the algorithm that carried out a collective.
type Algo uint8

// Algorithms; see docs/collectives.md.
const (
	AlgoAuto Algo = iota
	AlgoRing
	AlgoRecursiveDoubling
	AlgoRabenseifner
	AlgoTree
	AlgoChain
	AlgoDissemination
	AlgoDirect
)

var algoNames = [...]string{
	AlgoAuto:              "auto",
	AlgoRing:              "ring",
	AlgoRecursiveDoubling: "recursive_doubling",
	AlgoRabenseifner:      "rabenseifner",
	AlgoTree:              "tree",
	AlgoChain:             "chain",
	AlgoDissemination:     "dissemination",
	AlgoDirect:            "direct",
}

func (a Algo) String() string {
	if int(a) < len(algoNames) {
		return algoNames[a]
	}
	return fmt.Sprintf("algo(%d)", uint8(a))
}

// ParseAlgo parses an algorithm name as printed by Algo.String.
func ParseAlgo(s string) (Algo, error) {
	for i, n := range algoNames {
		if n == s {
			return Algo(i), nil
		}
	}
	return 0, fmt.Errorf("unknown algorithm %q (want auto, ring, recursive_doubling, rabenseifner, tree or chain)", s)
}

// Algorithms lists the algorithms that implement op.
func Algorithms(op Op) []Algo {
	switch op {
	case OpAllReduce:
		return []Algo{AlgoRing, AlgoRecursiveDoubling, AlgoRabenseifner, AlgoTree}
	case OpBroadcast:
		return []Algo{AlgoTree, AlgoChain}
	case OpReduce:
		return []Algo{AlgoTree}
	case OpAllGather, OpReduceScatter:
		return []Algo{AlgoRing}
	case OpBarrier:
		return []Algo{AlgoDissemination}
	}
	return nil
}
