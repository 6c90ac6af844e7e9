package atomicfile

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.html")
	n, err := Write(context.Background(), path, func(w io.Writer) error { _, err := io.WriteString(w, "hello"); return err })
	if err != nil || n != 5 {
		t.Fatal(n, err)
	}
	if b, _ := os.ReadFile(path); string(b) != "hello" {
		t.Fatalf("%q", b)
	}
	// A failed write leaves the old file and nothing else.
	if _, err := Write(context.Background(), path, func(w io.Writer) error {
		_, _ = io.WriteString(w, "half")
		return errors.New("boom")
	}); err == nil {
		t.Fatal("a failed write succeeded")
	}
	if b, _ := os.ReadFile(path); string(b) != "hello" {
		t.Fatalf("the old file became %q", b)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("left %v", ents)
	}
	if _, err := Write(context.Background(), dir, func(io.Writer) error { return nil }); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("writing over a directory: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Write(ctx, path, func(w io.Writer) error { _, err := w.Write([]byte("x")); return err }); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled write: %v", err)
	}
}
