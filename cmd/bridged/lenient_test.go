package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A bad value of a setting only the daemon uses, in the env file, does not
// stop status and chat (they warn); `bridged run` and `config` still refuse
// it, naming the variable.
func TestBadDaemonOnlyValueDoesNotBlockStatusAndChat(t *testing.T) {
	ctx := context.Background()
	home := newHome(t)
	envFile := filepath.Join(t.TempDir(), ".env")
	if err := os.WriteFile(envFile, []byte("BRIDGED_IDLE_TIMEOUT=soon\nBRIDGED_CONTAINER_MEMORY=lots\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	startDaemon(t, home, func(text string) []string { return []string{"echo: " + text} })
	if _, _, err := cli(t, ctx, nil, "", "groups", "add", "--home", home, "--env-file", envFile, "--name", "main", "--main", "local:main"); err != nil {
		t.Fatalf("groups add: %v", err)
	}
	out, stderr, err := cli(t, ctx, nil, "", "status", "--home", home, "--env-file", envFile)
	if err != nil || !strings.Contains(out, "bridged is running") {
		t.Errorf("status with a bad BRIDGED_IDLE_TIMEOUT in the env file: %v\n%s", err, out)
	}
	if !strings.Contains(stderr, `BRIDGED_IDLE_TIMEOUT="soon"`) || !strings.Contains(stderr, `BRIDGED_CONTAINER_MEMORY="lots"`) || !strings.Contains(stderr, "only the daemon uses it") {
		t.Errorf("status stderr %q; want a warning naming each bad variable", stderr)
	}
	if out, _, err := cli(t, ctx, nil, "", "chat", "--home", home, "--env-file", envFile, "-m", "hi"); err != nil || out != "echo: hi\n" {
		t.Errorf("chat -m with a bad BRIDGED_IDLE_TIMEOUT: %q, %v; want the reply", out, err)
	}
	for _, cmd := range []string{"run", "config"} {
		_, _, err := cli(t, ctx, nil, "", cmd, "--home", home, "--env-file", envFile)
		if err == nil || !strings.Contains(err.Error(), "BRIDGED_IDLE_TIMEOUT") {
			t.Errorf("%s with a bad BRIDGED_IDLE_TIMEOUT: %v; want it refused, naming the variable", cmd, err)
		}
	}
	// A bad value a client uses itself still stops it.
	if _, _, err := cli(t, ctx, map[string]string{"BRIDGED_ASSISTANT_NAME": "two words"}, "", "status", "--home", home); err == nil {
		t.Error("status with a bad BRIDGED_ASSISTANT_NAME: no error; want it refused")
	}
}
