package importers

import (
	"bytes"
	"context"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestImportRefusesNoRecord: /dev/zero, a 2 GB sparse file and random
// bytes are refused, given any format or detected, with an error naming
// the file, without reading them to their end; a log whose NCCL lines
// begin after 1 MiB of other output is detected and imported whole.
func TestImportRefusesNoRecord(t *testing.T) {
	dir := t.TempDir()
	sparse := filepath.Join(dir, "sparse.bin")
	f, err := os.Create(sparse)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2 << 30); err != nil {
		t.Skipf("no sparse file here: %v", err)
	}
	f.Close()
	random := filepath.Join(dir, "random.bin")
	b := make([]byte, 3<<20)
	rand.New(rand.NewSource(1)).Read(b)
	if err := os.WriteFile(random, b, 0o644); err != nil {
		t.Fatal(err)
	}
	inputs := []string{sparse, random}
	if _, err := os.Stat("/dev/zero"); err == nil {
		inputs = append(inputs, "/dev/zero")
	}
	for _, format := range append([]string{Auto}, Formats...) {
		for _, in := range inputs {
			t.Run(format+"/"+filepath.Base(in), func(t *testing.T) {
				ch := make(chan error, 1)
				go func() {
					_, err := Import(context.Background(), []string{in}, Options{Format: format, Out: filepath.Join(t.TempDir(), "run")})
					ch <- err
				}()
				select {
				case err := <-ch:
					if !errors.Is(err, ErrNotFormat) || !strings.Contains(err.Error(), in) {
						t.Errorf("%v, want a refusal naming %s", err, in)
					}
				case <-time.After(time.Minute):
					t.Fatalf("%s read as %s did not end within a minute", in, format)
				}
			})
		}
	}
	t.Run("late-log", func(t *testing.T) {
		log, err := os.ReadFile("testdata/nccl_debug.log")
		if err != nil {
			t.Fatal(err)
		}
		late := bytes.Repeat([]byte("launcher: starting the job, not an NCCL line at all\n"), (1<<20)/52+1)
		path := filepath.Join(dir, "late.log")
		if err := os.WriteFile(path, append(late, log...), 0o644); err != nil {
			t.Fatal(err)
		}
		_, want := importRun(t, Options{}, "testdata/nccl_debug.log")
		res, run := importRun(t, Options{}, path)
		if res.Format != NCCLLog || run.NumEvents() != want.NumEvents() || want.NumEvents() == 0 {
			t.Errorf("format %s, %d events; want nccl-log and %d", res.Format, run.NumEvents(), want.NumEvents())
		}
	})
}
