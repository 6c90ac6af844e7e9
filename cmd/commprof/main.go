// Command commprof records and analyzes the communication of distributed
// training. See docs/cli.md.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }
