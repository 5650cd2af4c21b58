package container

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

// managed is the part of the managed settings the tests read.
type managed struct {
	AllowManagedPermissionRulesOnly bool   `json:"allowManagedPermissionRulesOnly"`
	AllowManagedHooksOnly           bool   `json:"allowManagedHooksOnly"`
	DisableBypassPermissionsMode    string `json:"disableBypassPermissionsMode"`
	Permissions                     struct {
		Allow []string `json:"allow"`
		Deny  []string `json:"deny"`
	} `json:"permissions"`
}

// Outside full the managed settings lock permission rules and hooks to
// their own and carry the profile's rules (the CLI drops --allowedTools
// under allowManagedPermissionRulesOnly); full gets an empty policy.
func TestManagedSettings(t *testing.T) {
	for _, profile := range []string{"ask", "read-only", "chat"} {
		b, err := ManagedSettings(profile)
		if err != nil {
			t.Fatal(err)
		}
		var m managed
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v: %s", profile, err, b)
		}
		allow, deny := ipc.ProfileRules(profile)
		if !m.AllowManagedPermissionRulesOnly || !m.AllowManagedHooksOnly || m.DisableBypassPermissionsMode != "disable" ||
			!slices.Equal(m.Permissions.Allow, allow) || !slices.Equal(m.Permissions.Deny, append([]string{}, deny...)) {
			t.Errorf("%s: managed settings %s; want the lock keys and the profile's rules", profile, b)
		}
		for _, w := range []string{"Bash", "Write", "Edit", "WebFetch"} {
			if slices.Contains(m.Permissions.Allow, w) {
				t.Errorf("%s: %s pre-allowed by the managed settings", profile, w)
			}
		}
	}
	for _, profile := range []string{"full", ""} {
		if b, err := ManagedSettings(profile); err != nil || string(b) != "{}\n" {
			t.Errorf("%q: got %s, %v; want an empty policy", profile, b, err)
		}
	}
}

func TestSettingsJSONIsIPCEnv(t *testing.T) {
	var s struct {
		Env map[string]string `json:"env"`
	}
	if err := json.Unmarshal([]byte(settingsJSON), &s); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(s.Env, ipc.SettingsEnv()) {
		t.Errorf("settings.json env %v; want ipc.SettingsEnv %v (what --settings gives outside full)", s.Env, ipc.SettingsEnv())
	}
}

// Build of a group that is not full moves what its agent planted aside,
// tells Planted, writes bridged's settings.json again and mounts the
// managed settings read-only.
func TestBuildQuarantinesOutsideFull(t *testing.T) {
	b := newBuilder(t)
	var told []home.QuarantineReport
	b.Planted = func(g store.Group, rep home.QuarantineReport) { told = append(told, rep) }
	l := b.Home.Layout()
	g := store.Group{Chat: "local:fam", Name: "Family", Folder: "fam", Tools: store.ToolsReadOnly}
	planted := filepath.Join(l.ClaudeDir("fam"), SettingsName)
	if err := os.MkdirAll(filepath.Dir(planted), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(planted, []byte(`{"permissions":{"allow":["Bash"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	spec, release, err := b.Build(zerolog.Nop(), g, "bridged-fam-1", ipc.RunInput{Prompt: "hi", Group: "fam"})
	if err != nil {
		t.Fatal(err)
	}
	release()
	if len(told) != 1 || len(told[0].Moved) != 1 || told[0].Moved[0].Path != "data/sessions/fam/.claude/settings.json" {
		t.Fatalf("told %+v; want the planted settings.json", told)
	}
	if got, _ := os.ReadFile(planted); string(got) != settingsJSON {
		t.Errorf("settings.json holds %q after the start; want bridged's", got)
	}
	i := slices.IndexFunc(spec.Mounts, func(m Mount) bool { return m.Target == ipc.ContainerManagedSettings })
	if i < 0 || !spec.Mounts[i].ReadOnly {
		t.Fatalf("mounts %+v; want the managed settings read-only", spec.Mounts)
	}
	var m managed
	data, err := os.ReadFile(spec.Mounts[i].Source)
	if err != nil || json.Unmarshal(data, &m) != nil || !m.AllowManagedHooksOnly {
		t.Errorf("managed settings %s (%v); want read-only's", data, err)
	}
	if err := b.CheckMounts(&spec); err != nil {
		t.Errorf("CheckMounts: %v", err)
	}

	// Full: nothing moved, an empty policy.
	g.Tools = store.ToolsFull
	if err := os.WriteFile(planted, []byte(`{"hooks":{}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, release, err = b.Build(zerolog.Nop(), g, "bridged-fam-2", ipc.RunInput{Prompt: "hi", Group: "fam"}); err != nil {
		t.Fatal(err)
	}
	release()
	if len(told) != 1 {
		t.Errorf("told %d times; want nothing more for a full group", len(told))
	}
	if got, _ := os.ReadFile(ManagedSettingsFile(l, "fam")); string(got) != "{}\n" {
		t.Errorf("full group's managed settings %q; want {}", got)
	}
}
