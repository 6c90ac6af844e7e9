package importers

import (
	"strings"

	"github.com/commprof/commprof/trace"
)

// maxRanks bounds the rank numbers and world sizes read from input: more
// is damage, not a job (and would make every analysis allocate for it).
const maxRanks = 1 << 16

// event returns an event of kind on rank with every "none" field at its
// none value.
func event(kind trace.Kind, rank int, name string) trace.Event {
	return trace.Event{Kind: kind, Rank: int32(rank), Name: name, Peer: -1, Seq: -1, Step: -1, Root: -1, Chunk: -1}
}

// opName turns the many spellings of a collective (AllReduce,
// all_reduce, ALLREDUCE, _allgather_base, nccl:all_to_all, ...) into
// commprof's names: allreduce, allgather, reducescatter, broadcast,
// reduce, alltoall, barrier, send, recv, sendrecv, gather, scatter. A name
// it does not know comes back lowercased, without separators.
func opName(s string) string {
	s = strings.ToLower(s)
	s = strings.TrimPrefix(s, "c10d::")
	// A process group's record: nccl:all_reduce, gloo:all_reduce,
	// mpi:all_reduce, ...
	if i := strings.IndexByte(s, ':'); i > 0 && i+1 < len(s) && s[i+1] != ':' && strings.Trim(s[:i], "abcdefghijklmnopqrstuvwxyz") == "" {
		s = s[i+1:]
	}
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		}
	}
	n := b.String()
	switch {
	case strings.HasPrefix(n, "allreduce"):
		return "allreduce"
	case strings.HasPrefix(n, "allgather"):
		return "allgather"
	case strings.HasPrefix(n, "reducescatter"):
		return "reducescatter"
	case strings.HasPrefix(n, "alltoall"):
		return "alltoall"
	case n == "broadcast" || n == "bcast" || strings.HasPrefix(n, "broadcast"):
		return "broadcast"
	case n == "reduce":
		return "reduce"
	case n == "barrier":
		return "barrier"
	case n == "sendrecv":
		return "sendrecv"
	case n == "send":
		return "send"
	case n == "recv":
		return "recv"
	case n == "gather":
		return "gather"
	case n == "scatter":
		return "scatter"
	}
	return n
}

// dtypeName turns the spellings of element types in other tools' traces
// (Horovod's float32, PyTorch's Float and "long int", NCCL's ncclFloat32,
// nccl-tests' half) into commprof's (float32, float16, bfloat16, int64,
// ...); "" when unknown.
func dtypeName(s string) string {
	k := strings.ToLower(strings.TrimSpace(s))
	k = strings.TrimPrefix(k, "horovod_")
	k = strings.TrimPrefix(k, "nccl")
	k = strings.TrimPrefix(k, "torch.")
	switch k {
	case "float32", "float", "fp32", "f32", "c10::float":
		return "float32"
	case "float64", "double", "fp64", "f64":
		return "float64"
	case "float16", "half", "fp16", "f16", "c10::half":
		return "float16"
	case "bfloat16", "bf16", "c10::bfloat16":
		return "bfloat16"
	case "int8", "char", "signed char":
		return "int8"
	case "uint8", "byte", "unsigned char":
		return "uint8"
	case "int16", "short":
		return "int16"
	case "uint16":
		return "uint16"
	case "int32", "int", "c10::int":
		return "int32"
	case "uint32", "unsigned int":
		return "uint32"
	case "int64", "long", "long int", "long long", "int64_t":
		return "int64"
	case "uint64", "unsigned long", "uint64_t":
		return "uint64"
	case "bool":
		return "bool"
	case "float8e4m3", "float8_e4m3fn", "fp8_e4m3", "f8e4m3":
		return "float8e4m3"
	case "float8e5m2", "float8_e5m2", "fp8_e5m2", "f8e5m2":
		return "float8e5m2"
	}
	return ""
}

// dtypeSize returns the bytes of one element of a commprof dtype, 0 when
// unknown.
func dtypeSize(dtype string) int64 {
	switch dtype {
	case "int8", "uint8", "bool", "float8e4m3", "float8e5m2":
		return 1
	case "int16", "uint16", "float16", "bfloat16":
		return 2
	case "int32", "uint32", "float32":
		return 4
	case "int64", "uint64", "float64":
		return 8
	}
	return 0
}

// ncclDataTypes are ncclDataType_t's values, as NCCL's debug lines print
// them (nccl.h: ncclInt8 = 0 ... ncclFloat8e5m2 = 11).
var ncclDataTypes = []string{"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"}

// mulBytes returns n*size, or 0 when it would overflow.
func mulBytes(n, size int64) int64 {
	if n < 0 || size <= 0 || n > (1<<62)/size {
		return 0
	}
	return n * size
}
