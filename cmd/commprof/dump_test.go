package main

import (
	"strconv"
	"strings"
	"testing"
)

// dump --limit keeps only the earliest events of each stream as it reads,
// and must print exactly the first rows a whole dump prints, for every
// filter.
func TestDumpLimitIsTheHeadOfTheWholeDump(t *testing.T) {
	for _, filter := range [][]string{nil, {"--kind", "send"}, {"--rank", "1"}, {"--rank", "0", "--kind", "collective"}} {
		args := append([]string{"dump", trainRun, "--format", "csv"}, filter...)
		code, whole, errOut := inProcess(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", args, code, errOut)
		}
		rows := strings.Split(strings.TrimSuffix(whole, "\n"), "\n")
		if len(rows) < 20 {
			t.Fatalf("%v: %d rows", args, len(rows))
		}
		for _, n := range []int{1, 7, 40, len(rows) - 1, len(rows) + 5} {
			code, head, errOut := inProcess(t, append(args, "--limit", strconv.Itoa(n))...)
			if code != 0 {
				t.Fatalf("--limit %d: exit %d\n%s", n, code, errOut)
			}
			want := strings.Join(rows[:min(n+1, len(rows))], "\n") + "\n" // the header and n rows
			if head != want {
				t.Errorf("%v --limit %d: %d bytes, not the first %d rows of the whole dump", filter, n, len(head), n)
			}
		}
	}
}
