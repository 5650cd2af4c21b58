package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An unknown BRIDGED_ variable in the env file is named, with the nearest
// known one; names bridged uses elsewhere (the agent's, the tests') are
// not.
func TestUnknownVariablesNamed(t *testing.T) {
	envFile := filepath.Join(t.TempDir(), "bridged.env")
	os.WriteFile(envFile, []byte("BRIDGED_DASHBORD=127.0.0.1:8080\nBRIDGED_IMAGE=x:y\nBRIDGED_ENV_FILE=ignored\nBRIDGED_TRANSCRIBE_KEY=k\nBRIDGED_WHATEVER_ELSE_ENTIRELY=1\nOTHER=1\n"), 0o600)
	c, err := resolve(t, []string{"--env-file", envFile, "--home", t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(c.Unknown, "\n")
	if !strings.Contains(got, "BRIDGED_DASHBORD") || !strings.Contains(got, "did you mean BRIDGED_DASHBOARD?") || !strings.Contains(got, envFile) {
		t.Errorf("unknown variables %q; want BRIDGED_DASHBORD named in %s with BRIDGED_DASHBOARD", got, envFile)
	}
	if !strings.Contains(got, "BRIDGED_WHATEVER_ELSE_ENTIRELY ("+envFile+") is not a bridged setting: it is ignored") || len(c.Unknown) != 2 {
		t.Errorf("unknown variables %q; want BRIDGED_DASHBORD and BRIDGED_WHATEVER_ELSE_ENTIRELY only", got)
	}
	env := UnknownVariables([]string{"BRIDGED_IDEL_TIMEOUT", "BRIDGED_HOME", "BRIDGED_TEST_IMAGE", "BRIDGED_SKIP_DOCKER", "BRIDGED_AGENT_WORKDIR", "BRIDGED_MCP_GROUP", "PATH"}, "the environment")
	if len(env) != 1 || !strings.Contains(env[0], "BRIDGED_IDEL_TIMEOUT (the environment) is not a bridged setting: did you mean BRIDGED_IDLE_TIMEOUT?") {
		t.Errorf("UnknownVariables = %q; want BRIDGED_IDEL_TIMEOUT only, with BRIDGED_IDLE_TIMEOUT", env)
	}
}

// Given holds the variables a flag, the environment or the env file set,
// not the defaults; the env file read is an absolute path, whichever
// directory it was found from.
func TestGivenAndAbsoluteEnvFile(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, ".env"), []byte("BRIDGED_ASSISTANT_NAME=Bob\nANTHROPIC_API_KEY=sk-ant-xxxxxxxxxxxxxxxx\n"), 0o600)
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	c, err := resolve(t, []string{"--max-containers", "3"}, map[string]string{"BRIDGED_TIMEZONE": "UTC", "HOME": dir})
	if err != nil {
		t.Fatal(err)
	}
	if c.EnvFile != filepath.Join(dir, ".env") {
		t.Errorf("EnvFile %q; want the absolute %s", c.EnvFile, filepath.Join(dir, ".env"))
	}
	for _, k := range []string{"BRIDGED_ASSISTANT_NAME", "BRIDGED_MAX_CONTAINERS", "BRIDGED_TIMEZONE", EnvAPIKey} {
		if !c.Given[k] {
			t.Errorf("Given lacks %s", k)
		}
	}
	for _, k := range []string{"BRIDGED_IMAGE", "BRIDGED_HOME", EnvOAuthToken} {
		if c.Given[k] {
			t.Errorf("Given holds %s, a default", k)
		}
	}
}
