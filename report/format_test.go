package report

import (
	"encoding/json"
	"os"
	"os/exec"
	"testing"

	"github.com/commprof/commprof/internal/envnames"
)

// TestFormatJS runs format.js, the formatters of the pages' scripts, in
// node over a table of values.
func TestFormatJS(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv(envnames.RequireDeps) != "" {
			t.Fatal("node not found (make system-deps installs it)")
		}
		t.Skip("node not found")
	}
	type call struct {
		Fn   string    `json:"fn"`
		Args []float64 `json:"args"`
		Want string    `json:"want"`
	}
	// The cases internal/units holds Go's formatters to: the pages
	// print every one alike.
	b, err := os.ReadFile("../internal/units/testdata/format.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []call
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	// The pages' own: elapsed time, numbers with decimals.
	cases = append(cases, []call{
		{Fn: "number", Args: []float64{2.456}, Want: "2.46"}, {Fn: "number", Args: []float64{1024}, Want: "1,024"},
		{Fn: "bandwidth", Args: []float64{1e9, 1e8}, Want: "10 GB/s"}, {Fn: "percent", Args: []float64{0.125}, Want: "12.5%"},
		{Fn: "elapsed", Args: []float64{4.2e9}, Want: "4.2s"}, {Fn: "elapsed", Args: []float64{42e9}, Want: "42s"},
		{Fn: "elapsed", Args: []float64{65e9}, Want: "1m 5s"}, {Fn: "elapsed", Args: []float64{3725e9}, Want: "1h 2m"},
	}...)
	calls, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	script := formatJS + `
const F = globalThis.CommprofFormat;
const out = JSON.parse(process.argv[1]).map((c) => F[c.fn](...c.args));
process.stdout.write(JSON.stringify(out));
`
	out, err := exec.Command(node, "-e", script, string(calls)).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(cases) {
		t.Fatalf("node printed %s: %v", out, err)
	}
	for i, c := range cases {
		if got[i] != c.Want {
			t.Errorf("CommprofFormat.%s%v = %q, want %q", c.Fn, c.Args, got[i], c.Want)
		}
	}
}
