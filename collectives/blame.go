package collectives

import (
	"regexp"
	"strconv"
)

// namesPeer matches how this package's errors name another rank as the
// cause: a PeerError ("rank N failed: ..."), and, while joining, a rank
// that could not be reached ("connecting to rank N ...") or that dropped
// the connection ("rank N at ADDR (host H) dropped the connection").
var namesPeer = regexp.MustCompile(`\brank (\d+) failed: |\bconnecting to rank (\d+)\b|\brank (\d+) at \S+ \(host [^)]*\) dropped the connection`)

// BlamedRank returns the rank that msg, the error rank self ended with,
// says failed before it, other than self: the last one named (the deepest
// of a chain of causes), or -1 when msg names none. A launcher uses it to
// blame the rank that failed first rather than the first to exit.
func BlamedRank(msg string, self int) int {
	n := -1
	for _, m := range namesPeer.FindAllStringSubmatch(msg, -1) {
		if r, err := strconv.Atoi(m[1] + m[2] + m[3]); err == nil && r != self {
			n = r
		}
	}
	return n
}
