// Package termsafe makes text that bridged did not write (an agent's reply,
// a member's message, a group's name, a task's prompt, a tool's name) safe
// to print on a terminal.
//
// A terminal acts on some of the characters it is sent: ESC starts a
// sequence that can set the clipboard (OSC 52), clear the screen, retitle
// the window or redraw what was printed before; a carriage return or a
// backspace overwrites it; a bidi override reorders what follows so that the
// text shown is not the text sent; invisible format characters hide text
// from the reader (and not from an agent). Text turns every such character
// into one the reader can see and the terminal does not act on:
//
//   - C0 controls (U+0000–U+001F) other than newline and tab, and DEL,
//     become their Unicode control pictures (ESC is shown as ␛, CR as ␍);
//   - C1 controls (U+0080–U+009F), bidi embeddings, overrides and isolates
//     (U+202A–U+202E, U+2066–U+2069), line and paragraph separators and
//     every other format character (Unicode category Cf: zero-width spaces,
//     the byte order mark, tag characters, …) become U+FFFD; the zero-width
//     joiner and non-joiner stay, as emoji and some scripts need them and
//     they hide nothing;
//   - bytes that are not UTF-8 become U+FFFD.
//
// Line does the same and shows newlines and tabs too (as ␊ and ␉), for a
// value printed on one line or in a table cell.
//
// The package is a leaf: it imports nothing of bridged's own.
package termsafe

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Text returns s safe to print on a terminal, its newlines and tabs kept
// (see the package doc). Text that needs no change is returned as it is.
func Text(s string) string { return clean(s, false) }

// Line returns s safe to print on a terminal on one line: like Text, and
// newlines and tabs are shown as ␊ and ␉.
func Line(s string) string { return clean(s, true) }

// clean returns s with every character the terminal would act on shown
// instead; oneLine shows newlines and tabs too.
func clean(s string, oneLine bool) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if acts(r, size, oneLine) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if !acts(r, size, oneLine) {
			b.WriteRune(r)
			continue
		}
		b.WriteRune(shown(r, size))
	}
	return b.String()
}

// acts reports whether the rune r, size bytes long in its string, must not
// reach a terminal as it is.
func acts(r rune, size int, oneLine bool) bool {
	switch {
	case r == utf8.RuneError && size <= 1:
		return true // not UTF-8
	case r == '\n' || r == '\t':
		return oneLine
	case r < 0x20 || r == 0x7f:
		return true
	case r < 0x80:
		return false
	case r <= 0x9f:
		return true // C1
	case r == '\u200c' || r == '\u200d':
		return false // joiners: emoji sequences and scripts need them
	case r == '\u2028' || r == '\u2029':
		return true // line and paragraph separators
	}
	return unicode.Is(unicode.Cf, r)
}

// shown is what a rune r that acts (size bytes in its string) is shown as.
func shown(r rune, size int) rune {
	switch {
	case r == utf8.RuneError && size <= 1:
		return utf8.RuneError
	case r == 0x7f:
		return '\u2421' // ␡
	case r < 0x20:
		return 0x2400 + r // ␀ … ␟ (␛ for ESC, ␍ for CR, ␊ for a newline)
	}
	return utf8.RuneError
}

// JSON returns the JSON text b (as encoding/json writes it) with every
// character inside its strings that Text would change written as a \u
// escape instead: the same JSON value, safe to print. encoding/json
// escapes C0 controls and writes bytes that are not UTF-8 as U+FFFD
// already; C1 controls, bidi and other format characters it writes as they
// are. Newlines and tabs outside strings (the indentation) stay.
func JSON(b []byte) []byte {
	i := 0
	for i < len(b) {
		r, size := utf8.DecodeRune(b[i:])
		if r >= 0x80 && acts(r, size, false) {
			break
		}
		i += size
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	for i < len(b) {
		r, size := utf8.DecodeRune(b[i:])
		i += size
		if r < 0x80 || !acts(r, size, false) {
			out = utf8.AppendRune(out, r)
			continue
		}
		if r == utf8.RuneError {
			out = append(out, `\ufffd`...)
			continue
		}
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
			continue
		}
		out = fmt.Appendf(out, `\u%04x`, r)
	}
	return out
}
