package main

import (
	"embed"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/commprof/commprof/internal/iostreams"
)

// Each command's long help is a Markdown file of its own under help/:
// what `commprof CMD --help` prints, and, with the flags cobra knows,
// docs/cli.md (writeCLIDoc), so that the two never differ.
//
//go:embed help/*.md
var helpFiles embed.FS

// help is the long help of the command named name ("bench-read" for
// commprof bench read).
func help(name string) string {
	b, err := helpFiles.ReadFile("help/" + name + ".md")
	if err != nil {
		panic(fmt.Sprintf("no help/%s.md: %v", name, err)) // a missing file is a build mistake, which the tests catch
	}
	return strings.TrimRight(string(b), "\n")
}

// writeCLIDoc writes docs/cli.md: the exit statuses, then every command,
// from the command tree itself (its use line, help and flags).
func writeCLIDoc(w io.Writer) error {
	ios, _, _, _ := iostreams.Test()
	root := newRootCmd(nil, ios)
	root.DisableAutoGenTag = true
	header, err := helpFiles.ReadFile("help/_header.md")
	if err != nil {
		return err
	}
	if _, err := w.Write(header); err != nil {
		return err
	}
	anchor := func(name string) string {
		// cobra names a command's page commprof_bench_read.md; here
		// every command is a section of one page.
		name = strings.TrimSuffix(name, ".md")
		return "#" + strings.ReplaceAll(name, "_", "-")
	}
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		for _, sub := range c.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
			if err := doc.GenMarkdownCustom(sub, w, anchor); err != nil {
				return err
			}
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return err
	}
	if err := doc.GenMarkdownCustom(root, w, anchor); err != nil {
		return err
	}
	return walk(root)
}
