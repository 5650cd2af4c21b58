package home

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

func TestSpool(t *testing.T) {
	h, err := New(t.TempDir(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	sp := h.Spool()
	st, err := sp.Stage("../.report.pdf", "application/pdf", "document", strings.NewReader("%PDF-1.4 body"), 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := sp.Get(SpoolKey(1, "3EB0AA")); ok {
		t.Fatal("a staged file is found before it is kept")
	}
	if err := st.Keep(SpoolKey(1, "3EB0AA")); err != nil {
		t.Fatal(err)
	}
	f, ok, err := sp.Get(SpoolKey(1, "3EB0AA"))
	if err != nil || !ok {
		t.Fatalf("Get after Keep: %v, %v", ok, err)
	}
	if f.Name != "_.report.pdf" || f.Kind != "document" || f.MIME != "application/pdf" || f.Size != 13 {
		t.Errorf("spooled %+v; want _.report.pdf, a 13-byte PDF document", f)
	}
	if filepath.Dir(filepath.Dir(f.Path)) != h.Layout().SpoolDir() {
		t.Errorf("spooled at %s; want under %s", f.Path, h.Layout().SpoolDir())
	}
	if data, _ := os.ReadFile(f.Path); string(data) != "%PDF-1.4 body" {
		t.Errorf("spooled content %q", data)
	}
	if err := sp.Remove(SpoolKey(1, "3EB0AA")); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := sp.Get(SpoolKey(1, "3EB0AA")); ok {
		t.Error("found after Remove")
	}

	if _, err := sp.Stage("big.bin", "application/octet-stream", "document", strings.NewReader(strings.Repeat("x", 101)), 100); !errors.Is(err, ErrTooLarge) {
		t.Errorf("stage 101 bytes with a 100-byte limit = %v; want ErrTooLarge", err)
	}
	entries, _ := os.ReadDir(h.Layout().SpoolDir())
	if len(entries) != 0 {
		t.Errorf("spool holds %d entries after a refused stage; want none", len(entries))
	}
	if _, _, err := sp.Get("../x"); !errors.Is(err, ErrBadName) {
		t.Errorf("Get(../x) = %v; want ErrBadName", err)
	}
}
