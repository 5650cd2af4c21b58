package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// docs/testing.md's "The fake claude" lists every directive the fake plays,
// each with an example, for the owner who runs bridged on the test image.
func TestDirectivesDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/testing.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## The fake claude")
	if start < 0 {
		t.Fatal(`docs/testing.md has no section "The fake claude"`)
	}
	section := doc[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	verbs := regexp.MustCompile(`\((.*)\)`).FindStringSubmatch(directiveRE.String())[1]
	for _, v := range strings.Split(verbs, "|") {
		row := regexp.MustCompile("(?m)^\\| `fake:" + v + "\\b[^|]*` \\|[^|]+\\| `fake:" + v + "\\b[^`]*` \\|$")
		if !row.MatchString(section) {
			t.Errorf("the section lacks a row for fake:%s with an example", v)
		}
	}
}
