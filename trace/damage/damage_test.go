package damage

import (
	"os"
	"path/filepath"
	"testing"
)

// The generator makes every case it names, each with what commands must
// do with it, and fails rather than leave a case undamaged.
func TestCorpus(t *testing.T) {
	dst := filepath.Join(t.TempDir(), "corpus")
	cases, err := Corpus(dst, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 50 || cases[0].Name != "good" || cases[0].Want != Clean {
		t.Fatalf("%d cases, the first %+v", len(cases), cases[0])
	}
	seen := map[string]bool{}
	count := map[Outcome]int{}
	for _, c := range cases {
		if seen[c.Name] {
			t.Errorf("two cases named %q", c.Name)
		}
		seen[c.Name] = true
		count[c.Want]++
		if _, err := os.Stat(c.Dir); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
		if c.Want != Clean && len(c.Says) == 0 {
			t.Errorf("%s: %v, but no word of what the messages must say", c.Name, c.Want)
		}
	}
	for _, o := range []Outcome{Clean, Warned, Refused, Survives} {
		if count[o] == 0 {
			t.Errorf("no case is %v", o)
		}
	}
	// The same seed makes the same corpus.
	again, err := Corpus(filepath.Join(t.TempDir(), "corpus"), 1)
	if err != nil || len(again) != len(cases) {
		t.Fatalf("%v: %d cases, then %d", err, len(cases), len(again))
	}
	for i := range cases {
		if again[i].Name != cases[i].Name {
			t.Fatalf("case %d: %q, then %q", i, cases[i].Name, again[i].Name)
		}
	}
}

// A column the generator cannot find is an error, never a case left
// undamaged.
func TestPatchNotFound(t *testing.T) {
	b, err := stream(0, world, events(0, world)) // rank 0's: not the rank 1 columns the patch looks for
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{"rank", "peer"} {
		if _, err := patchInt32Column(b, col, 3, le32(7)); err == nil {
			t.Errorf("%s: patched a stream without the column's values", col)
		}
	}
	if _, err := patchInt32Column(b[:0], "peer", 3, le32(7)); err == nil {
		t.Error("patched an empty stream")
	}
}
