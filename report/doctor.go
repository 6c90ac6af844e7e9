package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/commprof/commprof/analyze"
)

// WriteDiagnosis writes the doctor's diagnosis for people: its
// sentences, culprits first, then one line per rank.
func WriteDiagnosis(w io.Writer, d *analyze.Diagnosis) error {
	var b strings.Builder
	fmt.Fprintf(&b, "verdict: %s", d.Verdict)
	if d.Status != "" {
		fmt.Fprintf(&b, " (run %s)", d.Status)
	}
	if len(d.Culprits) > 0 {
		fmt.Fprintf(&b, "; culprit: %s", analyze.RankList(d.Culprits))
	}
	b.WriteString("\n")
	for _, s := range d.Summary {
		fmt.Fprintf(&b, "  %s\n", s)
	}
	b.WriteString("\nrank  state          where\n")
	for _, r := range d.Ranks {
		mark := " "
		if r.Culprit {
			mark = "*"
		}
		fmt.Fprintf(&b, "%4d%s %-14s %s\n", r.Rank, mark, r.State, r.Where())
	}
	_, err := io.WriteString(w, b.String())
	return err
}
