package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// While the daemon runs, `config` prints the configuration it started with
// (here --image and --idle-timeout given to `bridged run` only, as the
// README's fallback `make run IMAGE=bridged-agent:test` does), claims
// nothing about files that hold no value, and `status --json` carries the
// credential; stopped, `config` says it describes the files.
func TestE2EConfigAsksTheDaemon(t *testing.T) {
	parallel(t, light)
	e := newEnv(t, "--idle-timeout", "7m")
	d := e.start()

	out := e.mustCLI("config")
	for _, want := range []string{"bridged is running", "BRIDGED_IMAGE=" + testImage + "\n", "BRIDGED_IDLE_TIMEOUT=7m0s\n",
		"credential: ANTHROPIC_API_KEY, unused"} {
		if !strings.Contains(out, want) {
			t.Errorf("bridged config with the daemon running:\n%s\nwant %q", out, want)
		}
	}
	if strings.Contains(out, "the files now say") {
		t.Errorf("bridged config with the daemon running:\n%s\nwant no claim about files that set neither value", out)
	}
	if strings.Contains(out, secret) {
		t.Errorf("bridged config printed the secret:\n%s", out)
	}
	// doctor checks the image the daemon runs, not the files' default.
	if doc, _ := e.cli("doctor"); !strings.Contains(doc, "image        ok    "+testImage) || !strings.Contains(doc, "bridged is running: the checks describe") ||
		strings.Contains(doc, "the files now say otherwise") {
		t.Errorf("doctor with the daemon running on %s:\n%s\nwant its image checked", testImage, doc)
	}
	var js map[string]string
	if err := json.Unmarshal([]byte(e.mustCLI("config", "--json")), &js); err != nil || js["image"] != testImage || js["source"] != "daemon" {
		t.Errorf("config --json: %v, %v; want the daemon's image and source daemon", js, err)
	}
	var st struct {
		Credential *struct {
			Variable, Source, State string
		} `json:"credential"`
	}
	if err := json.Unmarshal([]byte(e.mustCLI("status", "--json")), &st); err != nil || st.Credential == nil ||
		st.Credential.Variable != "ANTHROPIC_API_KEY" || st.Credential.Source != "daemon" || st.Credential.State != "unused" {
		t.Errorf("status --json credential: %+v, %v; want the daemon's ANTHROPIC_API_KEY, unused", st.Credential, err)
	}

	d.stop(t)
	out = e.mustCLI("config")
	if !strings.Contains(out, "bridged is not running") || !strings.Contains(out, "BRIDGED_IMAGE=bridged-agent:latest") {
		t.Errorf("bridged config with the daemon stopped:\n%s\nwant the files' values, said to be the files'", out)
	}
	// The daemon made whatsapp.db; nobody paired it.
	if out := e.mustCLI("status"); !strings.Contains(out, "whatsapp  not paired") {
		t.Errorf("stopped status:\n%s\nwant WhatsApp said not paired", out)
	}
	if err := json.Unmarshal([]byte(e.mustCLI("status", "--json")), &st); err != nil || st.Credential == nil || st.Credential.Source != "files" {
		t.Errorf("stopped status --json credential: %+v, %v; want the files' credential", st.Credential, err)
	}
}

// A key the upstream refuses: once the daemon's proxy has seen a 401,
// `status` and `doctor` say the daemon's key is refused and that a restart
// is needed after fixing it, and `status --json` says "refused".
func TestE2EStatusSaysKeyRefused(t *testing.T) {
	parallel(t, light)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`))
	}))
	t.Cleanup(up.Close)
	e := newEnv(t, "--idle-timeout", "2m")
	e.extraEnv = []string{"BRIDGED_ANTHROPIC_URL=" + up.URL}
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()

	if out := e.mustCLI("status"); !strings.Contains(out, "not used yet since the daemon started") {
		t.Errorf("status before any request:\n%s\nwant the key not used yet", out)
	}
	e.post("local:main", "fake:api hello")
	// The proxy logs each forwarded request with the upstream's status.
	if !d.waitLog(`"status":401`, 90*time.Second) {
		t.Fatalf("no request answered 401 within 90s")
	}
	out := e.mustCLI("status")
	if !strings.Contains(out, "REFUSED") || !strings.Contains(out, "restart bridged") {
		t.Errorf("status:\n%s\nwant the fix named (restart after fixing the key)", out)
	}
	var st struct {
		Credential struct{ State string } `json:"credential"`
	}
	if err := json.Unmarshal([]byte(e.mustCLI("status", "--json")), &st); err != nil || st.Credential.State != "refused" {
		t.Errorf("status --json credential state %q, %v; want refused", st.Credential.State, err)
	}
	doc, _ := e.cli("doctor")
	if !strings.Contains(doc, "was refused (401)") {
		t.Errorf("doctor:\n%s\nwant the daemon's refused key named", doc)
	}
}

// An OAuth token (a Claude subscription's) is warned about at start and by
// doctor: it is billed as extra usage when bridged uses it; an API key is
// recommended.
func TestE2EOAuthTokenWarned(t *testing.T) {
	parallel(t, light)
	e := newEnv(t)
	e.extraEnv = []string{"ANTHROPIC_API_KEY=", "CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-e2e-TOKEN-0123456789"}
	d := e.start()
	if !d.waitLog("billed as extra usage", 10*time.Second) {
		t.Errorf("no warning about the OAuth token at start:\n%s", tail(d.logs(), 20))
	}
	doc, _ := e.cli("doctor")
	if !strings.Contains(doc, "credentials  warn") || !strings.Contains(doc, "an API key (ANTHROPIC_API_KEY") {
		t.Errorf("doctor:\n%s\nwant the OAuth token warned about, an API key recommended", doc)
	}
	if strings.Contains(doc, "sk-ant-oat01-e2e-TOKEN") || strings.Contains(d.logs(), "sk-ant-oat01-e2e-TOKEN") {
		t.Error("the token was printed")
	}
}

// A key added after the daemon started (here: in the commands' environment
// only): status and doctor describe the daemon, which has no credential,
// and doctor names the restart.
func TestE2EKeyAddedWithoutRestart(t *testing.T) {
	parallel(t, light)
	e := newEnv(t)
	e.extraEnv = []string{"ANTHROPIC_API_KEY="}
	e.start()
	e.extraEnv = nil // the commands now see the harness's key
	if out := e.mustCLI("status"); !strings.Contains(out, "Claude API: NO CREDENTIAL") {
		t.Errorf("status:\n%s\nwant the daemon's missing credential, not the key the files now have", out)
	}
	doc, _ := e.cli("doctor")
	if !strings.Contains(doc, "the running daemon has no credential") || !strings.Contains(doc, "restart bridged to use it") {
		t.Errorf("doctor:\n%s\nwant the daemon's missing credential and the restart named", doc)
	}
}
