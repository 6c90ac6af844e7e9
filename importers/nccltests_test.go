package importers

import (
	"strings"
	"testing"

	"github.com/commprof/commprof/trace"
)

// TestNTAlgo: an nccl-tests run's algorithm is the one NCCL_ALGO leaves
// NCCL for the op, and unknown whenever NCCL had a choice.
func TestNTAlgo(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		op   string
		want string
	}{
		{nil, "allreduce", trace.AlgoUnknown},
		{[]string{"Ring"}, "allreduce", "ring"},
		{[]string{"Tree"}, "broadcast", "tree"},
		{[]string{"CollNetDirect"}, "allreduce", "collnet_direct"},
		{[]string{"NVLSTree"}, "allreduce", "nvls_tree"},
		{[]string{"ring,tree"}, "allreduce", trace.AlgoUnknown}, // NCCL chooses between them
		{[]string{"^tree"}, "allreduce", trace.AlgoUnknown},     // every algorithm but one
		{[]string{"Ring", "Tree"}, "allreduce", trace.AlgoUnknown},
		{[]string{"allreduce:tree;broadcast:ring"}, "allreduce", "tree"},
		{[]string{"allreduce:tree;broadcast:ring"}, "broadcast", "ring"},
		{[]string{"allreduce:tree;broadcast:ring"}, "allgather", trace.AlgoUnknown},
		{[]string{"ring;allreduce:tree"}, "allgather", "ring"},
	} {
		set := map[string]bool{}
		for _, v := range tc.set {
			set[v] = true
		}
		got, how := ntAlgo(set, tc.op)
		if got != tc.want {
			t.Errorf("NCCL_ALGO %v, %s: %q, want %q", tc.set, tc.op, got, tc.want)
		}
		if (how != "") != (tc.want == trace.AlgoUnknown) || (how != "" && !strings.Contains(how, "assumes")) {
			t.Errorf("NCCL_ALGO %v, %s: missing %q", tc.set, tc.op, how)
		}
	}
}
