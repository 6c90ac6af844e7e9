package main

import (
	"strings"
	"testing"
)

// TestFlagSuggestions: a mistyped flag is answered with the command's
// flags it is near, as cobra answers a mistyped command; one near none
// gets no suggestion. Each is a usage error.
func TestFlagSuggestions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" for no suggestion
	}{
		{[]string{"record", "--rank", "4", "--", "train"}, "Did you mean --ranks?"},
		{[]string{"record", "-rank", "4", "--", "train"}, "Did you mean --ranks?"},
		{[]string{"record", "--frce", "--", "train"}, "Did you mean --force?"},
		{[]string{"bench", "allreduce", "--iter", "3"}, "Did you mean --iters?"},
		{[]string{"report", "--opn", "RUN"}, "Did you mean --open?"},
		{[]string{"record", "--wholly-unknown", "--", "train"}, ""},
	} {
		code, _, stderr := inProcess(t, tc.args...)
		if code != exitUsage || !strings.Contains(stderr, "unknown") {
			t.Errorf("%q: exit %d, want %d and the unknown flag named:\n%s", tc.args, code, exitUsage, stderr)
		}
		if got := strings.Contains(stderr, "Did you mean"); tc.want == "" && got || tc.want != "" && !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: want %q in:\n%s", tc.args, tc.want, stderr)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{{"rank", "ranks", 1}, {"frce", "force", 1}, {"", "out", 3}, {"kitten", "sitting", 3}, {"same", "same", 0}} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
