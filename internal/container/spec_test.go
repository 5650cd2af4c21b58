package container

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/ipc"
)

const testSecret = "sk-ant-test-SECRET-0123456789"

func validSpec() Spec {
	return Spec{
		Name:     "bridged-family-1",
		Image:    "bridged-agent:test",
		Group:    "family",
		Instance: "inst-1",
		User:     "1000:1000",
		Mounts:   []Mount{{Source: "/srv/bridged/groups/family", Target: "/workspace/group"}},
		Env:      []string{"TZ=Europe/Berlin"},
		Input: ipc.RunInput{
			Prompt: "hello", Group: "family", Chat: "local:family", AssistantName: "Andy",
		},
		Forbidden: []string{testSecret},
		Limits:    Limits{MemoryBytes: 512 << 20, CPUs: 1.5, Pids: 256},
		Labels:    map[string]string{"bridged.run": "r1"},
	}
}

func TestCheckSpec(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*Spec)
		want   string // "" means valid
	}{
		{"valid", func(*Spec) {}, ""},
		{"no image", func(s *Spec) { s.Image = "" }, "no image"},
		{"no user", func(s *Spec) { s.User = "" }, "no user"},
		{"root by id", func(s *Spec) { s.User = "0:0" }, "root"},
		{"root by id, no group", func(s *Spec) { s.User = "0" }, "root"},
		{"root by name", func(s *Spec) { s.User = "root" }, "root"},
		{"credential variable", func(s *Spec) { s.Env = append(s.Env, "ANTHROPIC_API_KEY=whatever") }, "ANTHROPIC_API_KEY"},
		{"oauth variable", func(s *Spec) { s.Env = append(s.Env, "CLAUDE_CODE_OAUTH_TOKEN=x") }, "CLAUDE_CODE_OAUTH_TOKEN"},
		{"secret value in env", func(s *Spec) { s.Env = append(s.Env, "OTHER=pre"+testSecret) }, "OTHER"},
		{"secret in label", func(s *Spec) { s.Labels["x"] = testSecret }, "label"},
		{"secret in the input", func(s *Spec) { s.Input.Prompt = "key " + testSecret }, "run input"},
		{"secret in a mount", func(s *Spec) { s.Mounts = append(s.Mounts, Mount{Source: "/x/" + testSecret, Target: "/y"}) }, "mount"},
		{"unknown network", func(s *Spec) { s.Network = "host" }, "network"},
		{"invalid input", func(s *Spec) { s.Input.Prompt = "" }, "input"},
		{"relative mount", func(s *Spec) { s.Mounts[0].Source = "groups/family" }, "not absolute"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSpec()
			tt.mutate(&s)
			err := checkSpec(s)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v; want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v; want ErrBadSpec mentioning %q", err, tt.want)
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Errorf("error %q reveals the secret", err)
			}
		})
	}
}

func TestCreateOptions(t *testing.T) {
	s := validSpec()
	s.Labels[LabelManaged] = "spoofed"
	opts := createOptions(s)
	cfg, hc := opts.Config, opts.HostConfig

	raw, err := json.Marshal(opts)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), testSecret) || strings.Contains(string(raw), "hello") {
		t.Errorf("create options carry the input: %s", raw)
	}
	wantLabels := map[string]string{LabelManaged: "1", LabelGroup: "family", LabelInstance: "inst-1", "bridged.run": "r1"}
	if !reflect.DeepEqual(cfg.Labels, wantLabels) {
		t.Errorf("labels %v; want %v", cfg.Labels, wantLabels)
	}
	if cfg.User != "1000:1000" || cfg.WorkingDir != "/workspace/group" || cfg.Tty || !cfg.OpenStdin || !cfg.StdinOnce {
		t.Errorf("config %+v; want user 1000:1000, workdir /workspace/group, stdin open once, no tty", cfg)
	}
	if len(cfg.Cmd) != 0 || len(cfg.Entrypoint) != 0 {
		t.Errorf("cmd %v entrypoint %v; want the image's", cfg.Cmd, cfg.Entrypoint)
	}
	if !slices.Contains(cfg.Env, "HOME=/home/agent") || !slices.Contains(cfg.Env, "TZ=Europe/Berlin") {
		t.Errorf("env %v; want TZ and HOME", cfg.Env)
	}
	if !slices.Equal(hc.CapDrop, []string{"ALL"}) || !slices.Contains(hc.SecurityOpt, "no-new-privileges") {
		t.Errorf("capdrop %v secopt %v; want ALL and no-new-privileges", hc.CapDrop, hc.SecurityOpt)
	}
	if !hc.AutoRemove || hc.Init == nil || !*hc.Init || hc.Privileged {
		t.Errorf("autoremove %v init %v privileged %v; want auto-remove and init, not privileged", hc.AutoRemove, hc.Init, hc.Privileged)
	}
	if hc.Memory != 512<<20 || hc.NanoCPUs != 1_500_000_000 || hc.PidsLimit == nil || *hc.PidsLimit != 256 {
		t.Errorf("memory %d cpus %d pids %v; want 512MiB, 1.5 CPUs, 256", hc.Memory, hc.NanoCPUs, hc.PidsLimit)
	}
	if tmp := hc.Tmpfs["/tmp"]; !strings.Contains(tmp, "mode=1777") || !strings.Contains(tmp, "size=268435456") {
		t.Errorf("tmpfs /tmp %q; want mode=1777 and the default size", tmp)
	}
	if len(hc.Binds) != 0 || len(hc.Mounts) != 1 || hc.Mounts[0].Source != "/srv/bridged/groups/family" || hc.Mounts[0].Type != "bind" {
		t.Errorf("mounts %+v binds %v; want one bind mount", hc.Mounts, hc.Binds)
	}
}

func TestLineWriter(t *testing.T) {
	tests := []struct {
		name   string
		max    int
		cut    bool
		writes []string
		want   []string
		long   []int
	}{
		{name: "split across writes", max: 100, writes: []string{"ab", "c\nde", "f\n\ng"}, want: []string{"abc", "def", "", "g"}},
		{name: "overlong dropped", max: 4, writes: []string{"ok\n12345", "678\nnext\n"}, want: []string{"ok", "next"}, long: []int{8}},
		{name: "overlong cut", max: 4, cut: true, writes: []string{"123456\nab\n"}, want: []string{"1234", "ab"}},
		{name: "last line without newline", max: 10, writes: []string{"tail"}, want: []string{"tail"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			var long []int
			w := &lineWriter{max: tt.max, cut: tt.cut,
				line: func(b []byte) { got = append(got, string(b)) },
				long: func(n int) { long = append(long, n) }}
			for _, s := range tt.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			w.flush()
			if !slices.Equal(got, tt.want) {
				t.Errorf("lines %q; want %q", got, tt.want)
			}
			if !slices.Equal(long, tt.long) {
				t.Errorf("long %v; want %v", long, tt.long)
			}
		})
	}
}

func TestNetworkMode(t *testing.T) {
	s := validSpec()
	if got := createOptions(s).HostConfig.NetworkMode; got != "" {
		t.Errorf("default network mode %q; want the engine's default", got)
	}
	s.Network = "none"
	if err := checkSpec(s); err != nil {
		t.Fatal(err)
	}
	if got := createOptions(s).HostConfig.NetworkMode; got != "none" {
		t.Errorf("network mode %q; want none", got)
	}
}
