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
		want string
	}
	cases := []call{
		{"duration", []float64{0}, "0 ns"}, {"duration", []float64{850}, "850 ns"}, {"duration", []float64{999.6}, "1 µs"},
		{"duration", []float64{12_345}, "12.3 µs"}, {"duration", []float64{999_700}, "1 ms"}, {"duration", []float64{4_560_000}, "4.56 ms"},
		{"duration", []float64{2e6}, "2 ms"}, {"duration", []float64{2.1e9}, "2.1 s"}, {"duration", []float64{-12_345}, "-12.3 µs"},
		{"bytes", []float64{8}, "8 B"}, {"bytes", []float64{1000}, "1,000 B"}, {"bytes", []float64{1536}, "1.5 KiB"},
		{"bytes", []float64{262_144}, "256 KiB"}, {"bytes", []float64{129_500_000}, "124 MiB"}, {"bytes", []float64{-2048}, "-2 KiB"},
		{"bytes", []float64{1 << 30}, "1 GiB"},
		{"gbps", []float64{8.123}, "8.12 GB/s"}, {"gbps", []float64{0.512}, "0.51 GB/s"}, {"gbps", []float64{0.005}, "5 MB/s"},
		{"gbps", []float64{1234.5}, "1,235 GB/s"}, {"gbps", []float64{0}, "0 GB/s"}, {"bandwidth", []float64{1e9, 1e8}, "10 GB/s"},
		{"percent", []float64{0.125}, "12.5%"}, {"percent", []float64{0.5}, "50%"},
		{"int", []float64{1_234_567.4}, "1,234,567"}, {"number", []float64{2.456}, "2.46"}, {"number", []float64{1024}, "1,024"},
		{"elapsed", []float64{4.2e9}, "4.2s"}, {"elapsed", []float64{42e9}, "42s"}, {"elapsed", []float64{65e9}, "1m 5s"},
		{"elapsed", []float64{3725e9}, "1h 2m"},
	}
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
		if got[i] != c.want {
			t.Errorf("CommprofFormat.%s%v = %q, want %q", c.Fn, c.Args, got[i], c.want)
		}
	}
}
