// Package testcover lets a test that runs bridged's programs as child
// processes count what those children execute in its own coverage figure,
// through Go's integration coverage (https://go.dev/doc/build-cover).
//
// When the test runs with -cover, BuildFlags gives `go build` the flags that
// instrument a child binary in the same mode, and Env gives the child the
// GOCOVERDIR the test itself writes to, so that `go test -cover` merges the
// child's counters into the figure it prints. A test re-executing its own
// binary needs only Env: without it, the instrumented child prints
// "warning: GOCOVERDIR not set" on its standard error.
//
// It is imported by tests only.
package testcover

import (
	"flag"
	"os"
	"testing"
)

// BuildFlags returns the `go build` flags that instrument a child binary for
// the running test's coverage mode; none when the test runs without -cover.
func BuildFlags() []string {
	mode := testing.CoverMode()
	if mode == "" {
		return nil
	}
	return []string{"-cover", "-covermode=" + mode}
}

// Env returns the environment entry that sends a child's coverage counters
// where the running test keeps its own: its -test.gocoverdir, else the
// GOCOVERDIR it inherited, else a directory of tb's (the counts are then
// lost, but the child stays quiet). None when the test runs without -cover.
func Env(tb testing.TB) []string {
	if testing.CoverMode() == "" {
		return nil
	}
	dir := tb.TempDir()
	if f := flag.Lookup("test.gocoverdir"); f != nil && f.Value.String() != "" {
		dir = f.Value.String()
	} else if d := os.Getenv("GOCOVERDIR"); d != "" {
		dir = d
	}
	return []string{"GOCOVERDIR=" + dir}
}
