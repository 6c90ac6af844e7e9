package report

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/commprof/commprof/internal/envnames"
)

// TestEChartsIsTheNpmBundle: the ECharts committed in report/assets/echarts
// (and embedded) is, byte for byte, what the npm package pinned in
// package.json ships, licenses included. It needs node_modules (make
// web-deps); `make echarts` refreshes the copy.
func TestEChartsIsTheNpmBundle(t *testing.T) {
	root := filepath.Join("..", "node_modules")
	read := func(p string) []byte {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	npmPkg, err := os.ReadFile(filepath.Join(root, "echarts", "package.json"))
	if errors.Is(err, fs.ErrNotExist) {
		if os.Getenv(envnames.RequireDeps) != "" {
			t.Fatal("node_modules/echarts is not installed (make web-deps)")
		}
		t.Skip("node_modules/echarts is not installed (make web-deps)")
	}
	if err != nil {
		t.Fatal(err)
	}
	var installed, pinned struct {
		Version      string            `json:"version"`
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(npmPkg, &installed); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(read(filepath.Join("..", "package.json")), &pinned); err != nil {
		t.Fatal(err)
	}
	if v := pinned.Dependencies["echarts"]; installed.Version != v {
		t.Fatalf("node_modules holds echarts %s but package.json pins %s: run make web-deps", installed.Version, v)
	}
	for committed, npm := range map[string]string{
		"echarts.min.js":  filepath.Join(root, "echarts", "dist", "echarts.min.js"),
		"LICENSE":         filepath.Join(root, "echarts", "LICENSE"),
		"NOTICE":          filepath.Join(root, "echarts", "NOTICE"),
		"LICENSE-d3":      filepath.Join(root, "echarts", "licenses", "LICENSE-d3"),
		"LICENSE-zrender": filepath.Join(root, "zrender", "LICENSE"),
	} {
		if string(read(filepath.Join("assets", "echarts", committed))) != string(read(npm)) {
			t.Errorf("report/assets/echarts/%s differs from %s: run make echarts and commit the result", committed, npm)
		}
	}
	if echartsJS != string(read(filepath.Join(root, "echarts", "dist", "echarts.min.js"))) {
		t.Error("the embedded echarts.min.js is not npm's")
	}
}
