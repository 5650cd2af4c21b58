package termsafe

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain", "hello, world", "hello, world"},
		{"newline and tab kept", "a\tb\nc", "a\tb\nc"},
		{"emoji with joiners", "👨\u200d👩\u200d👧 ok", "👨\u200d👩\u200d👧 ok"},
		{"accents and scripts", "café שלום 日本", "café שלום 日本"},
		{"OSC 52 sets the clipboard", "x\x1b]52;c;cm0gLXJmIH4K\x07y", "x␛]52;c;cm0gLXJmIH4K␇y"},
		{"clear screen", "\x1b[2J\x1b[Hhi", "␛[2J␛[Hhi"},
		{"title", "\x1b]0;pwned\x1b\\", "␛]0;pwned␛\\"},
		{"carriage return overwrites", "safe\rEVIL", "safe␍EVIL"},
		{"backspace and NUL and DEL", "a\bb\x00c\x7f", "a␈b␀c␡"},
		{"C1 CSI", "a\u009b2Jb", "a\ufffd2Jb"},
		{"bidi override", "file\u202etxt.exe", "file\ufffdtxt.exe"},
		{"bidi isolates", "\u2066a\u2067b\u2068c\u2069", "\ufffda\ufffdb\ufffdc\ufffd"},
		{"zero-width space and BOM", "pass\u200bword\ufeff", "pass\ufffdword\ufffd"},
		{"tag characters", "hi\U000E0041\U000E0042", "hi\ufffd\ufffd"},
		{"line separator", "a\u2028b", "a\ufffdb"},
		{"invalid UTF-8", "a\xffb\xc3", "a\ufffdb\ufffd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Text(tt.in); got != tt.want {
				t.Errorf("Text(%q) = %q; want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestLine(t *testing.T) {
	if got, want := Line("tool\nforged line\tx\x1b[31m"), "tool␊forged line␉x␛[31m"; got != want {
		t.Errorf("Line = %q; want %q", got, want)
	}
}

// Whatever the input, nothing a terminal acts on is left: no control
// character but newline and tab, no format character but the joiners, and
// valid UTF-8.
func TestTextLeavesNothingActive(t *testing.T) {
	var all strings.Builder
	for r := rune(0); r < 0x3000; r++ {
		all.WriteRune(r)
	}
	for r := rune(0xe0000); r < 0xe0100; r++ {
		all.WriteRune(r)
	}
	all.WriteString("\xff\xfe\xc0")
	for _, f := range []func(string) string{Text, Line} {
		out := f(all.String())
		if !utf8.ValidString(out) {
			t.Fatal("output is not UTF-8")
		}
		for _, r := range out {
			if r == '\n' || r == '\t' || r == '\u200c' || r == '\u200d' {
				continue
			}
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
				t.Fatalf("%U left in the output", r)
			}
		}
	}
}

func TestUnchangedIsNotCopied(t *testing.T) {
	s := strings.Repeat("plain text ", 100)
	if got := Text(s); got != s {
		t.Fatal("plain text changed")
	}
	if n := testing.AllocsPerRun(100, func() { _ = Text(s) }); n != 0 {
		t.Errorf("Text of plain text allocates %v times; want 0", n)
	}
}

func TestJSON(t *testing.T) {
	v := map[string]string{"text": "a\x1b]52;c;eA==\x07 b\u009b2J c\u202ed \U000E0041 é 👨\u200d👩", "bad": "x\xffy"}
	b, err := json.MarshalIndent(v, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	out := JSON(b)
	var back map[string]string
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatalf("JSON made %s, which is not JSON: %v", out, err)
	}
	if back["text"] != v["text"] || back["bad"] != "x\ufffdy" {
		t.Errorf("JSON changed the value: %q; want %q", back, v)
	}
	for _, r := range string(out) {
		if r != '\n' && r != '\t' && r != '\u200d' && (unicode.IsControl(r) || unicode.Is(unicode.Cf, r)) {
			t.Errorf("%U left in %s", r, out)
		}
	}
	if !strings.Contains(string(out), `\u202e`) || !strings.Contains(string(out), `\udb40\udc41`) {
		t.Errorf("JSON = %s; want the override and the tag character escaped", out)
	}
	plain := []byte(`{"a": "b"}`)
	if got := JSON(plain); &got[0] != &plain[0] {
		t.Error("JSON copied text that needed no change")
	}
}
