package runner

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/ipc"
)

// Outside full, claude's argv names no settings the agent can write: no
// setting source, no MCP server but the runner's, bridged's env as flag
// settings; the group's CLAUDE.md reaches the model through the appended
// system prompt instead. Full keeps the user and project settings.
func TestSettingsSourcesPerProfile(t *testing.T) {
	work, global := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "CLAUDE.md"), []byte("group memory"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(global, "CLAUDE.md"), []byte("global memory"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, profile := range []string{ProfileFull, ProfileAsk, ProfileReadOnly, ProfileChat} {
		r, err := newRun(Config{
			Input:  ipc.RunInput{Group: "fam", Chat: "local:fam", Tools: profile},
			IPCDir: t.TempDir(), WorkDir: work, GlobalDir: global, Claude: "claude", Self: "agent-runner",
			Logger: zerolog.Nop(),
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		args, err := r.args()
		if err != nil {
			t.Fatal(err)
		}
		joined := strings.Join(args, " ")
		if profile == ProfileFull {
			if !slices.Contains(args, "--setting-sources=project,user") || strings.Contains(joined, "--settings") {
				t.Errorf("full: argv %q; want the user and project settings loaded as before", args)
			}
			if r.append != "global memory" {
				t.Errorf("full: appended %q; want the global memory only (the CLI loads the group's)", r.append)
			}
			continue
		}
		if !slices.Contains(args, "--setting-sources=") || !slices.Contains(args, "--strict-mcp-config") {
			t.Errorf("%s: argv %q; want --setting-sources= and --strict-mcp-config", profile, args)
		}
		for _, a := range args {
			if strings.HasPrefix(a, "--setting-sources=") && a != "--setting-sources=" {
				t.Errorf("%s: %s names a source the agent can write", profile, a)
			}
		}
		i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--settings=") })
		if i < 0 || !strings.Contains(args[i], `"CLAUDE_CODE_EXPERIMENTAL_AGENT_TEAMS":"1"`) {
			t.Errorf("%s: argv %q; want bridged's env block as --settings", profile, args)
		}
		if r.append != "global memory\n\ngroup memory" {
			t.Errorf("%s: appended %q; want the global then the group's memory", profile, r.append)
		}
	}
}

func TestGroupMemoryBounded(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "CLAUDE.md")
	if err := os.WriteFile(p, []byte(strings.Repeat("x", MaxGroupMemory+10)), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := groupMemory(p, zerolog.Nop()); len(got) != MaxGroupMemory {
		t.Errorf("got %d bytes; want the first %d", len(got), MaxGroupMemory)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", p); err != nil {
		t.Fatal(err)
	}
	if got := groupMemory(p, zerolog.Nop()); got != "" {
		t.Errorf("got %q through a link; want nothing", got)
	}
	if got := groupMemory(filepath.Join(dir, "missing"), zerolog.Nop()); got != "" {
		t.Errorf("got %q for a missing file", got)
	}
}

func TestBridgeToolsRule(t *testing.T) {
	if want := "mcp__" + MCPServerName + "__*"; ipc.BridgeTools != want {
		t.Errorf("ipc's bridge rule %q (the profiles' and the managed settings') does not name the runner's MCP server's tools, %q", ipc.BridgeTools, want)
	}
}
