package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/commprof/commprof/internal/iostreams"
)

var updateCLIDoc = flag.Bool("update-cli-doc", false, "rewrite docs/cli.md from the command tree")

// docs/cli.md is generated from the commands themselves (their help files
// and flags): it must be what writeCLIDoc writes now. After changing a
// command, rewrite it with go test ./cmd/commprof -run CLIDoc -update-cli-doc.
func TestCLIDocIsCurrent(t *testing.T) {
	var b bytes.Buffer
	if err := writeCLIDoc(&b); err != nil {
		t.Fatal(err)
	}
	const path = "../../docs/cli.md"
	if *updateCLIDoc {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, b.Bytes()) {
		t.Fatalf("docs/cli.md is not what the commands say; rewrite it with go test ./cmd/commprof -run CLIDoc -update-cli-doc and review the diff")
	}
	// Every command is in it, with its flags.
	for _, want := range []string{"## commprof record", "--stall-after", "## commprof bench read", "## commprof doctor", "--sample", "| exit status | meaning |"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("docs/cli.md lacks %q", want)
		}
	}
}

// Every command's long help is its help file.
func TestEveryCommandHasItsHelp(t *testing.T) {
	ios, _, _, _ := iostreams.Test()
	root := newRootCmd(nil, ios)
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			continue
		}
		if c.Long == "" || c.Long != help(strings.ReplaceAll(strings.TrimPrefix(c.CommandPath(), "commprof "), " ", "-")) {
			t.Errorf("commprof %s: its long help is not help/%s.md", c.Name(), c.Name())
		}
	}
}
