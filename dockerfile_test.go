package bridged_test

import (
	"bufio"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The production image's build context must never carry the owner's
// secrets: `docker build .` in a checkout where `make run` made its home
// (.bridged: the database, the WhatsApp keys) and the owner keeps a .env
// (the Claude credential) sends the whole directory to the engine, and a
// `COPY . .` keeps it in a cached layer. These tests read .dockerignore
// and the Dockerfile as Docker does.

// ignoreRule is one .dockerignore line.
type ignoreRule struct {
	re     *regexp.Regexp
	negate bool
}

// readDockerignore parses .dockerignore: comments and blank lines are
// skipped, a leading "!" re-includes, a leading "/" is dropped, and the
// patterns use filepath.Match syntax plus "**" for any number of levels.
func readDockerignore(t *testing.T) []ignoreRule {
	t.Helper()
	f, err := os.Open(".dockerignore")
	if err != nil {
		t.Fatalf("no .dockerignore: %v", err)
	}
	defer f.Close()
	var rules []ignoreRule
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r := ignoreRule{}
		if rest, ok := strings.CutPrefix(line, "!"); ok {
			r.negate, line = true, strings.TrimSpace(rest)
		}
		line = path.Clean(strings.TrimPrefix(line, "/"))
		r.re = regexp.MustCompile("^" + globRegexp(line) + "$")
		rules = append(rules, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rules
}

// globRegexp turns a .dockerignore pattern into a regular expression.
func globRegexp(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case strings.HasPrefix(p[i:], "**/"):
			b.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	return b.String()
}

// excluded reports whether Docker leaves rel (slash-separated, relative to
// the context) out of the context: the last rule matching rel or one of
// its parent directories decides.
func excluded(rules []ignoreRule, rel string) bool {
	out := false
	for _, r := range rules {
		for p := rel; ; p = path.Dir(p) {
			if r.re.MatchString(p) {
				out = !r.negate
				break
			}
			if !strings.Contains(p, "/") {
				break
			}
		}
	}
	return out
}

func TestBuildContextKeepsSecretsOut(t *testing.T) {
	rules := readDockerignore(t)
	for _, p := range []string{
		".env", ".env.local", ".bridged", ".bridged/store/whatsapp.db", ".bridged/store/bridged.db",
		".git", ".git/config", "bin", "bin/bridged", "coverage", "coverage/covcounters.1", "coverage.out",
		"dist/bridged.tar.gz", "bridged", "agent-runner.test", "cpu.out",
		// inside the directories that are sent
		"agent-runner/.env", "internal/ipc/.bridged/store/whatsapp.db", "agent-runner/bin/x",
	} {
		if !excluded(rules, p) {
			t.Errorf("%s is in the image's build context; want it excluded by .dockerignore", p)
		}
	}
}

// copySources returns the source paths of the COPY lines of the
// Dockerfile's build stage (the first), and whether any later stage copies
// from the context rather than from an earlier stage.
func copySources(t *testing.T) (build []string, laterFromContext []string) {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	stage := 0
	// Join continuation lines first.
	text := strings.ReplaceAll(string(data), "\\\n", " ")
	for _, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			stage++
		case "COPY", "ADD":
			args := fields[1:]
			fromStage := false
			for len(args) > 0 && strings.HasPrefix(args[0], "--") {
				fromStage = fromStage || strings.HasPrefix(args[0], "--from=")
				args = args[1:]
			}
			if fromStage || len(args) < 2 {
				continue
			}
			srcs := args[:len(args)-1]
			if stage == 1 {
				build = append(build, srcs...)
			} else {
				laterFromContext = append(laterFromContext, srcs...)
			}
		}
	}
	return build, laterFromContext
}

func TestImageBuildCopiesOnlyWhatItNeeds(t *testing.T) {
	rules := readDockerignore(t)
	srcs, later := copySources(t)
	if len(later) > 0 {
		t.Errorf("the runtime stage copies %v from the build context; want only --from=build", later)
	}
	// The module's packages agent-runner is built from, by directory.
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./agent-runner").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var need []string
	for _, p := range strings.Fields(string(out)) {
		if rel, ok := strings.CutPrefix(p, module+"/"); ok {
			need = append(need, rel)
		} else if p == module {
			need = append(need, ".")
		}
	}
	if len(need) == 0 {
		t.Fatal("go list found no package of the module in agent-runner's build")
	}
	for _, s := range srcs {
		s = path.Clean(strings.TrimPrefix(s, "./"))
		switch {
		case s == "go.mod" || s == "go.sum":
		case slices.Contains(need, s):
		default:
			t.Errorf("the Dockerfile copies %q, which the agent-runner build does not need; copy go.mod, go.sum and the directories of its packages only", s)
			continue
		}
		if excluded(rules, s) {
			t.Errorf("the Dockerfile copies %q, which .dockerignore leaves out of the context", s)
		}
	}
	for _, n := range need {
		covered := false
		for _, s := range srcs {
			s = path.Clean(strings.TrimPrefix(s, "./"))
			if s == "." || n == s || strings.HasPrefix(n, s+"/") {
				covered = true
			}
		}
		if !covered {
			t.Errorf("the agent-runner needs %s, which the Dockerfile does not copy", n)
		}
		if excluded(rules, n) {
			t.Errorf("the agent-runner needs %s, which .dockerignore leaves out of the context", n)
		}
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		if !slices.Contains(srcs, f) {
			t.Errorf("the Dockerfile does not copy %s", f)
		}
		if excluded(rules, f) {
			t.Errorf(".dockerignore leaves %s out of the context", f)
		}
	}
}

func TestBuildContextIgnoreMatcher(t *testing.T) {
	rules := []ignoreRule{
		{re: regexp.MustCompile("^" + globRegexp("*") + "$")},
		{re: regexp.MustCompile("^" + globRegexp("src") + "$"), negate: true},
		{re: regexp.MustCompile("^" + globRegexp("**/.env") + "$")},
	}
	for p, want := range map[string]bool{
		"x": true, "a/b": true, "src": false, "src/a.go": false, "src/.env": true, ".env": true, "src/x/.env": true,
	} {
		if got := excluded(rules, p); got != want {
			t.Errorf("excluded(%q) = %v; want %v", p, got, want)
		}
	}
}
