package rules

import (
	"strings"
	"testing"
)

func TestAssistantNames(t *testing.T) {
	for name, want := range map[string]bool{
		"Andy": true, "Анди": true, "andy_2": true, "a-b": true, "7": true,
		strings.Repeat("x", 32): true, strings.Repeat("é", 32): true,
		"": false, "two words": false, "-andy": false, "_andy": false, "@Andy": false,
		strings.Repeat("x", 33): false, strings.Repeat("é", 33): false, "an\xffdy": false, "an\u200bdy": false,
	} {
		if got := CheckAssistantName(name) == nil; got != want {
			t.Errorf("CheckAssistantName(%q) ok = %v; want %v", name, got, want)
		}
	}
}
