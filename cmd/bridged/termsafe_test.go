package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/control"
)

const hostileText = "A\x1b]52;c;cm0gLXJmIH4K\x07B\x1b[2J\x1b]0;pwned\x07\u202eC\r\u009b"

// noEscapes fails when out carries ESC, a C1 control, CR or a bidi override.
func noEscapes(t *testing.T, what, out string) {
	t.Helper()
	if strings.ContainsAny(out, "\x1b\u009b\r\u202e") {
		t.Errorf("%s printed an escape or an override: %q", what, out)
	}
}

// A story whose message, reason and steps carry terminal escapes prints
// none of them.
func TestPrintStoryIsSafe(t *testing.T) {
	at := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	printStory(&b, control.Story{
		Message: control.StoryMessage{ID: 7, Chat: "local:fam" + hostileText, Text: hostileText},
		Group:   "fam", Why: hostileText,
		Steps: []control.StoryStep{{Step: "reply" + hostileText, At: &at, Detail: hostileText, State: hostileText}},
	}, time.UTC)
	noEscapes(t, "printStory", b.String())
	if !strings.Contains(b.String(), "A␛]52") {
		t.Errorf("printStory printed %q; want the escapes shown", b.String())
	}
}

// JSON output keeps the values and escapes what a terminal would act on.
func TestWriteJSONIsSafe(t *testing.T) {
	var b bytes.Buffer
	if err := writeJSON(&b, map[string]string{"text": hostileText}); err != nil {
		t.Fatal(err)
	}
	noEscapes(t, "writeJSON", b.String())
	if !strings.Contains(b.String(), `\u202e`) || !strings.Contains(b.String(), `\u009b`) {
		t.Errorf("writeJSON printed %s; want the override and the C1 control escaped", b.String())
	}
}
