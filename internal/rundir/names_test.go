package rundir

import (
	"regexp"
	"testing"
)

func TestSafeName(t *testing.T) {
	for in, want := range map[string]string{
		"train":              "train",
		"my job (v2)":        "my-job-v2",
		"../../etc/passwd":   "etc-passwd",
		"..":                 "",
		"résumé.log":         "r-sum-.log",
		"--all_reduce_perf-": "all_reduce_perf",
		"a//b":               "a-b",
	} {
		if got := SafeName(in); got != want {
			t.Errorf("SafeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNewID(t *testing.T) {
	a, b := NewID("bs32"), NewID("bs32")
	if a == b || !regexp.MustCompile(`^bs32-[0-9a-f]{12}$`).MatchString(a) {
		t.Errorf("NewID: %q and %q", a, b)
	}
}
