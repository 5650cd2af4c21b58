package ipctest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/ipc"
)

func TestWaitFor(t *testing.T) {
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	cases := []struct {
		name string
		// sub is the directory waited on, relative to a fresh temp dir.
		sub string
		// before runs before the wait; change runs once the watch is in
		// place (on cond's first call), as the awaited event.
		before, change func(t *testing.T, dir string)
		cond           func(dir string) bool
	}{
		{name: "file already there", sub: "d",
			before: func(t *testing.T, dir string) { mustWrite(t, dir, "a.json") },
			cond:   func(dir string) bool { return exists(filepath.Join(dir, "a.json")) }},
		{name: "file appears", sub: "d",
			before: func(t *testing.T, dir string) { mkdir(t, dir) },
			change: func(t *testing.T, dir string) { mustWrite(t, dir, "a.json") },
			cond:   func(dir string) bool { return exists(filepath.Join(dir, "a.json")) }},
		{name: "file disappears", sub: "d",
			before: func(t *testing.T, dir string) { mustWrite(t, dir, "a.json") },
			change: func(t *testing.T, dir string) {
				if err := os.Remove(filepath.Join(dir, "a.json")); err != nil {
					t.Error(err)
				}
			},
			cond: func(dir string) bool { return !exists(filepath.Join(dir, "a.json")) }},
		{name: "file grows", sub: "d",
			before: func(t *testing.T, dir string) {
				mkdir(t, dir)
				if err := os.WriteFile(filepath.Join(dir, "log"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			change: func(t *testing.T, dir string) {
				f, err := os.OpenFile(filepath.Join(dir, "log"), os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = f.WriteString("line\n")
				f.Close()
			},
			cond: func(dir string) bool {
				b, _ := os.ReadFile(filepath.Join(dir, "log"))
				return len(b) > 0
			}},
		{name: "directory created later", sub: "a/b/c",
			change: func(t *testing.T, dir string) { mustWrite(t, dir, "a.json") },
			cond:   func(dir string) bool { return exists(filepath.Join(dir, "a.json")) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), tc.sub)
			if tc.before != nil {
				tc.before(t, dir)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			changed := false
			err := WaitFor(ctx, dir, func() bool {
				if !changed && tc.change != nil {
					changed = true
					if tc.cond(dir) {
						t.Fatal("cond holds before the change; the case tests nothing")
					}
					// The change happens after the check: only an event can
					// wake the wait now.
					defer tc.change(t, dir)
					return false
				}
				return tc.cond(dir)
			})
			if err != nil {
				t.Fatalf("got %v; want the wait to end when the change is seen", err)
			}
		})
	}
}

func TestWaitForEndsWithContext(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	calls := 0
	mustWrite(t, dir, "other.json") // an unrelated change before the wait
	err := WaitFor(ctx, dir, func() bool { calls++; return false })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v; want context.DeadlineExceeded", err)
	}
	if calls == 0 {
		t.Error("cond never checked; want it checked once the watch is in place")
	}
}

func TestWaitForRejectsAFileAsDirectory(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, dir, "f")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := WaitFor(ctx, filepath.Join(dir, "f", "sub"), func() bool { return false })
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v; want an error at once for a path through a file", err)
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, dir, name string) {
	t.Helper()
	if err := ipc.WriteFileAtomic(dir, name, []byte("{}")); err != nil {
		t.Error(err)
	}
}
