package bridged_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/bridged-app/bridged"
)

// The README opens with `make run` and `make test`, then the prerequisites:
// the Go version go.mod names, make, git and access to Docker; and says
// that one static binary leaves no runtime to upgrade.
func TestREADMEFirstLines(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod names no go version")
	}
	readme := bridged.README
	block := readme[strings.Index(readme, "```sh\n")+len("```sh\n"):]
	lines := strings.SplitN(block, "\n", 3)
	if !strings.HasPrefix(lines[0], "make run ") || !strings.HasPrefix(lines[1], "make test ") {
		t.Errorf("the README's first commands are %q; want make run, then make test", lines[:2])
	}
	top := readme[:strings.Index(readme, "## First steps")]
	prereq := top[strings.Index(top, "```\n"):]
	for _, want := range []string{"Go " + string(m[1]), "make", "git", "Docker", "docker group"} {
		if !strings.Contains(prereq, want) {
			t.Errorf("the README's top, after its first commands, lacks the prerequisite %q:\n%s", want, prereq)
		}
	}
	if !strings.Contains(strings.Join(strings.Fields(top), " "), "no runtime to upgrade") {
		t.Errorf("the README's top does not say that one static binary leaves no runtime to upgrade:\n%s", top)
	}
}
