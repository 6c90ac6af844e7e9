package commprof_test

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/commprof/commprof/"

// thirdParty are the outside modules only some packages may import
// (docs/architecture.md): by module path prefix, the packages that may,
// and those whose tests may too.
var thirdParty = []struct {
	prefix      string
	only, tests []string
	doc         string // what docs/architecture.md says of it
}{
	{"github.com/spf13/cobra", []string{"cmd/commprof"}, nil, "the only importer of cobra"},
	{"github.com/spf13/pflag", []string{"cmd/commprof"}, nil, "the only importer of cobra"},
	{"github.com/schollz/progressbar", []string{"cmd/commprof"}, nil, "the only importer of cobra"},
	{"github.com/go-echarts/", []string{"report"}, nil, "the only importer of go-echarts"},
	// The PMPI library's tests read its C writer's streams with Arrow
	// itself, as an oracle independent of trace/.
	{"github.com/apache/arrow/", []string{"trace"}, []string{"interpose/pmpi"}, "Arrow types stay inside `trace/`: no other package imports Arrow"},
}

// pkg is a package of the module as go list sees it.
type pkg struct {
	path         string // under the module
	imports      []string
	testImports  []string
	internalDeps []string // imports of the module's packages, without tests
	testDeps     []string // imports of the module's packages by the tests only
}

// testHarnesses are the packages that exist for tests: any package's
// tests may import them, and no package's code may.
var testHarnesses = []string{"analyze/analyzetest", "trace/damage", "internal/webtest"}

// testsMayAlso are what the tests of a package may import beyond its row
// and the harnesses ("*": every package's tests), as
// docs/architecture.md says: the names of the test suite's switches, and
// for report's tests the importers, to draw pages of real traces.
var testsMayAlso = map[string][]string{"*": {"internal/envnames"}, "report": {"importers"}}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command to list the packages")
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .TestImports \" \"}} {{join .XTestImports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			t.Fatalf("go list: %q", line)
		}
		p := pkg{path: strings.TrimPrefix(f[0], module), imports: strings.Fields(f[1]), testImports: strings.Fields(f[2])}
		if p.path == strings.TrimSuffix(module, "/") {
			p.path = "."
		}
		for _, imp := range p.imports {
			if dep, ok := strings.CutPrefix(imp, module); ok {
				p.internalDeps = append(p.internalDeps, dep)
			}
		}
		for _, imp := range p.testImports {
			if dep, ok := strings.CutPrefix(imp, module); ok && !slices.Contains(p.internalDeps, dep) && dep != p.path {
				p.testDeps = append(p.testDeps, dep)
			}
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// row is a row of docs/architecture.md's table: its packages and what
// they may import ("*" for anything).
type row struct {
	pkgs, may []string
}

func readTable(t *testing.T) ([]row, string) {
	t.Helper()
	b, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	tick := regexp.MustCompile("`([^`]+)`")
	var rows []row
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		cells := strings.Split(sc.Text(), "|")
		// | package | owns | may import |
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		var r row
		for _, m := range tick.FindAllStringSubmatch(cells[1], -1) {
			r.pkgs = append(r.pkgs, m[1])
		}
		if strings.Contains(cells[3], "anything below") {
			r.may = []string{"*"}
		}
		for _, m := range tick.FindAllStringSubmatch(cells[3], -1) {
			r.may = append(r.may, m[1])
		}
		rows = append(rows, r)
	}
	if len(rows) < 10 {
		t.Fatalf("docs/architecture.md: %d rows in the table of packages", len(rows))
	}
	return rows, string(b)
}

// under reports whether package p is q or inside it.
func under(p, q string) bool { return p == q || strings.HasPrefix(p, q+"/") }

// TestArchitecture checks the module's imports against the table of
// docs/architecture.md: every package has its row (the row of the
// longest package it is inside), imports only the packages its row names
// (or its own subpackages), and the outside modules only some may import
// are imported only there.
func TestArchitecture(t *testing.T) {
	rows, doc := readTable(t)
	pkgs := listPackages(t)
	rowOf := func(p string) (row, string, bool) {
		var best row
		bestName := ""
		for _, r := range rows {
			for _, q := range r.pkgs {
				if under(p, q) && len(q) > len(bestName) {
					best, bestName = r, q
				}
			}
		}
		return best, bestName, bestName != ""
	}
	known := map[string]bool{}
	for _, p := range pkgs {
		known[p.path] = true
	}
	for _, r := range rows {
		for _, q := range append(slices.Clone(r.pkgs), r.may...) {
			if q == "*" {
				continue
			}
			found := false
			for k := range known {
				found = found || under(k, q)
			}
			if !found {
				t.Errorf("docs/architecture.md names %q, which is no package of the module", q)
			}
		}
	}
	for _, p := range pkgs {
		if p.path == "." {
			continue // this test
		}
		r, name, ok := rowOf(p.path)
		if !ok {
			t.Errorf("package %s has no row in docs/architecture.md's table", p.path)
			continue
		}
		may := func(dep string) bool {
			allowed := slices.Contains(r.may, "*") || under(dep, name) || under(dep, p.path)
			for _, q := range r.may {
				allowed = allowed || under(dep, q)
			}
			return allowed
		}
		for _, dep := range p.internalDeps {
			if slices.Contains(testHarnesses, dep) && !slices.Contains(testHarnesses, p.path) {
				t.Errorf("%s imports %s, a harness only tests may import", p.path, dep)
			} else if !may(dep) {
				t.Errorf("%s imports %s, which its row (%s) in docs/architecture.md does not allow: %v", p.path, dep, name, r.may)
			}
		}
		// Tests hold to the same rows: a test may also import the
		// harnesses made for tests, and its own package's (an external
		// test package imports the package it tests).
		for _, dep := range p.testDeps {
			if !may(dep) && !slices.Contains(testHarnesses, dep) && !slices.Contains(testsMayAlso["*"], dep) && !slices.Contains(testsMayAlso[p.path], dep) {
				t.Errorf("the tests of %s import %s, which its row (%s) in docs/architecture.md does not allow: %v", p.path, dep, name, r.may)
			}
		}
	}
	for _, tp := range thirdParty {
		if !strings.Contains(doc, tp.doc) {
			t.Errorf("docs/architecture.md does not say %q", tp.doc)
		}
		for _, p := range pkgs {
			ok := func(list []string) bool {
				for _, q := range list {
					if under(p.path, q) {
						return true
					}
				}
				return false
			}
			for _, imp := range p.imports {
				if strings.HasPrefix(imp, tp.prefix) && !ok(tp.only) {
					t.Errorf("%s imports %s: only %v may", p.path, imp, tp.only)
				}
			}
			for _, imp := range p.testImports {
				if strings.HasPrefix(imp, tp.prefix) && !ok(tp.only) && !ok(tp.tests) {
					t.Errorf("the tests of %s import %s: only %v may (and the tests of %v)", p.path, imp, tp.only, tp.tests)
				}
			}
		}
	}
}
