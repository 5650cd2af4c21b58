package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMemoryShowsTheCLAUDEmdLoaded(t *testing.T) {
	home, dir, extra := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "CLAUDE.md"), []byte("# Group\nlikes tea\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(extra, "CLAUDE.md"), []byte("# Global\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		env    []string
		args   []string
		want   []string
		unwant string
	}{
		{env: baseEnv(home, "CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD=1"), want: []string{"memory " + filepath.Join(dir, "CLAUDE.md") + ":\n# Group\nlikes tea", "memory " + filepath.Join(extra, "CLAUDE.md") + ":\n# Global"}},
		{env: baseEnv(home), want: []string{"likes tea"}, unwant: "# Global"},
		{env: baseEnv(home), args: []string{"--setting-sources=user", "--append-system-prompt=# Global appended"},
			want: []string{"system prompt appended:\n# Global appended"}, unwant: "likes tea"},
	} {
		p := startFake(t, dir, c.env, append([]string{"--add-dir=" + extra}, c.args...)...)
		p.sendUser("fake:memory")
		r, _ := p.result()
		got, _ := r["result"].(string)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("got %q; want it to hold %q", got, w)
			}
		}
		if c.unwant != "" && strings.Contains(got, c.unwant) {
			t.Errorf("got %q; want no %q here", got, c.unwant)
		}
		p.wait()
	}
}

func TestMemoryShowsInitializesAppendedPrompt(t *testing.T) {
	home, dir := t.TempDir(), t.TempDir()
	p := startFake(t, dir, baseEnv(home), "--setting-sources=user")
	p.send(`{"request_id":"m1","type":"control_request","request":{"subtype":"initialize","appendSystemPrompt":"# Global\nAnswer in English."}}`)
	p.sendUser("fake:memory")
	if resp := p.next(); resp["type"] != "control_response" {
		t.Fatalf("got first line %v; want the initialize control_response", resp)
	}
	r, _ := p.result()
	if got, _ := r["result"].(string); got != "system prompt appended:\n# Global\nAnswer in English." {
		t.Errorf("got %q; want initialize's appended prompt", got)
	}
	p.wait()
}
