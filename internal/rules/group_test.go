package rules

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/channel/local"
	"github.com/bridged-app/bridged/internal/home"
	"github.com/bridged-app/bridged/internal/store"
)

func TestLocalPrefixIsTheChannels(t *testing.T) {
	if LocalPrefix != local.Prefix {
		t.Errorf("got LocalPrefix %q; want the local channel's %q", LocalPrefix, local.Prefix)
	}
}

func TestCheckChat(t *testing.T) {
	tests := []struct {
		chat string
		ok   bool
	}{
		{"local:main", true},
		{"tg:-1001234567890", true},
		{"tg:123456", true},
		{"tg:0", false},
		{"tg:+5", false},
		{"tg:-0", false},
		{"tg:12a", false},
		{"tg:", false},
		{"local:my-chat_2.0", true},
		{"local:" + strings.Repeat("a", MaxLocalName), true},
		{"120363000000000001@g.us", true},
		{"4915100000000-1500000000@g.us", true},
		{"4915100000000@s.whatsapp.net", true},
		{"200000000000002@lid", true},

		{"", false},
		{"local:", false},
		{"local:../../x", false},
		{"local:a..b", false},
		{"local:.hidden", false},
		{"local:-dash", false},
		{"local:a/b", false},
		{`local:a\b`, false},
		{"local:a b", false},
		{"local:a\nb", false},
		{"local:a\x00", false},
		{"local:a\u200bb", false}, // zero-width space
		{"local:" + strings.Repeat("a", MaxLocalName+1), false},
		{"local:ünï", false},
		{"hello", false},
		{"@g.us", false},
		{"x@g.us", false},
		{"123@g.us.evil", false},
		{"123@g.us@g.us", false},
		{"1-2-3@g.us", false},
		{"123:4@s.whatsapp.net", false},
		{"alice@s.whatsapp.net", false},
		{"123@newsletter", false},
		{" local:main", false}, // CheckChat takes the id as given; Group trims
	}
	for _, tt := range tests {
		err := CheckChat(tt.chat)
		if got := err == nil; got != tt.ok {
			t.Errorf("CheckChat(%q) = %v; want ok %v", tt.chat, err, tt.ok)
		}
		if err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "chat")) {
			t.Errorf("CheckChat(%q) = %v; want an ErrInvalid that speaks of the chat id", tt.chat, err)
		}
	}
}

func TestCheckFolder(t *testing.T) {
	tests := []struct {
		folder string
		ok     bool
	}{
		{"main", true},
		{"the-family", true},
		{"2026", true},
		{"", false},
		{"global", false},
		{"ipc", false},
		{"errors", false},
		{"logs", false},
		{"Family", false},
		{"-x", false},
		{"../x", false},
		{"a/b", false},
		{".hidden", false},
		{"a b", false},
		{strings.Repeat("a", store.MaxFolderLen+1), false},
	}
	for _, tt := range tests {
		err := CheckFolder(tt.folder)
		if got := err == nil; got != tt.ok {
			t.Errorf("CheckFolder(%q) = %v; want ok %v", tt.folder, err, tt.ok)
		}
		if err != nil && (!errors.Is(err, ErrInvalid) || !errors.Is(err, store.ErrInvalidFolder)) {
			t.Errorf("CheckFolder(%q) = %v; want ErrInvalid and store.ErrInvalidFolder", tt.folder, err)
		}
		// The path-level check of the home is the last line of defence: it
		// must never refuse what registration accepts.
		if err == nil {
			if herr := home.CheckFolder(tt.folder); herr != nil {
				t.Errorf("home.CheckFolder(%q) = %v; want it to accept every registrable folder", tt.folder, herr)
			}
		}
	}
}

func TestSlug(t *testing.T) {
	tests := []struct{ in, want string }{
		{"main", "main"},
		{"The Family!", "the-family"},
		{"  Work -- Team 2 ", "work-team-2"},
		{"Ünïcode", "n-code"},
		{"!!!", ""},
		{strings.Repeat("ab-", 40), strings.TrimRight(strings.Repeat("ab-", 40)[:64], "-")},
	}
	for _, tt := range tests {
		if got := Slug(tt.in); got != tt.want {
			t.Errorf("Slug(%q) = %q; want %q", tt.in, got, tt.want)
		}
		if got := Slug(tt.in); got != "" {
			if err := CheckFolder(got); err != nil {
				t.Errorf("Slug(%q) = %q, which CheckFolder refuses: %v", tt.in, got, err)
			}
		}
	}
}

func TestNormTrigger(t *testing.T) {
	tests := []struct {
		in, assistant string
		want          string // empty: refused
	}{
		{"", "Andy", "@Andy"},
		{"   ", "Bob", "@Bob"},
		{"", "", "@" + DefaultAssistantName},
		{"@Andy", "Andy", "@Andy"},
		{"Bob", "Andy", "@Bob"},
		{"  @bob  ", "Andy", "@bob"},
		{"@Jürgen", "Andy", "@Jürgen"},
		{"@r2-d2", "Andy", "@r2-d2"},
		{"@" + strings.Repeat("a", MaxTrigger-1), "Andy", "@" + strings.Repeat("a", MaxTrigger-1)},

		{"@nl\nx", "Andy", ""},
		{"@two words", "Andy", ""},
		{"@tab\tx", "Andy", ""},
		{"@", "Andy", ""},
		{"@@", "Andy", ""},
		{"@!?", "Andy", ""},
		{"@zero\u200bwidth", "Andy", ""},
		{"@bell\a", "Andy", ""},
		{"@" + strings.Repeat("a", MaxTrigger), "Andy", ""},
	}
	for _, tt := range tests {
		got, err := NormTrigger(tt.in, tt.assistant)
		if tt.want == "" {
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "trigger") {
				t.Errorf("NormTrigger(%q) = %q, %v; want an ErrInvalid that speaks of the trigger", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("NormTrigger(%q, %q) = %q, %v; want %q", tt.in, tt.assistant, got, err, tt.want)
		}
	}
}

func TestNormName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"The Family", "The Family"},
		{"  Book club 📚 ", "Book club 📚"},
		{strings.Repeat("é", MaxName), strings.Repeat("é", MaxName)},
		{"", ""},
		{"   ", ""},
		{"two\nlines", ""},
		{strings.Repeat("é", MaxName+1), ""},
	}
	for _, tt := range tests {
		got, err := NormName(tt.in)
		if (err == nil) != (tt.want != "") || got != tt.want {
			t.Errorf("NormName(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestGroup(t *testing.T) {
	tests := []struct {
		name    string
		in      NewGroup
		want    store.Group
		wantErr string
	}{
		{
			name: "defaults",
			in:   NewGroup{Chat: " local:main ", Name: " Main ", IsMain: true},
			want: store.Group{Chat: "local:main", Name: "Main", Folder: "main", Trigger: "@Andy", RequiresTrigger: true, IsMain: true},
		},
		{
			name: "everything given",
			in:   NewGroup{Chat: "120363@g.us", Name: "The Family!", Folder: "fam", Trigger: "Bob", RequiresTrigger: ptr(false)},
			want: store.Group{Chat: "120363@g.us", Name: "The Family!", Folder: "fam", Trigger: "@Bob", RequiresTrigger: false},
		},
		{name: "folder from the name", in: NewGroup{Chat: "local:x", Name: "Work -- Team 2"},
			want: store.Group{Chat: "local:x", Name: "Work -- Team 2", Folder: "work-team-2", Trigger: "@Andy", RequiresTrigger: true}},
		{name: "no chat", in: NewGroup{Name: "x"}, wantErr: "a chat id is required"},
		{name: "path in the chat", in: NewGroup{Chat: "local:../../x", Name: "x"}, wantErr: `chat id "local:../../x"`},
		{name: "no name", in: NewGroup{Chat: "local:x", Folder: "x"}, wantErr: "a name is required"},
		{name: "name without a slug", in: NewGroup{Chat: "local:x", Name: "!!!"}, wantErr: "gives no folder name"},
		{name: "hostile folder", in: NewGroup{Chat: "local:x", Name: "x", Folder: "../x"}, wantErr: "invalid group folder"},
		{name: "reserved folder", in: NewGroup{Chat: "local:x", Name: "global"}, wantErr: "reserved"},
		{name: "newline in the trigger", in: NewGroup{Chat: "local:x", Name: "x", Trigger: "@nl\nx"}, wantErr: "trigger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Group(tt.in, "Andy")
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %+v, %v; want an ErrInvalid containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got %v; want %+v", err, tt.want)
			}
			if got.Chat != tt.want.Chat || got.Name != tt.want.Name || got.Folder != tt.want.Folder ||
				got.Trigger != tt.want.Trigger || got.RequiresTrigger != tt.want.RequiresTrigger || got.IsMain != tt.want.IsMain {
				t.Errorf("got %+v; want %+v", got, tt.want)
			}
		})
	}
}

func TestChangeGroup(t *testing.T) {
	base := store.Group{Chat: "local:x", Name: "X", Folder: "x", Trigger: "@Andy", RequiresTrigger: true,
		ContainerConfig: store.ContainerConfig{Model: "opus", Timeout: time.Hour,
			ExtraMounts: []store.MountRequest{{HostPath: "/srv/a"}}}}
	tests := []struct {
		name    string
		c       GroupChange
		check   func(g store.Group) bool
		wantErr string
	}{
		{"nothing", GroupChange{}, func(g store.Group) bool {
			return g.Name == "X" && g.ContainerConfig.Model == "opus" && len(g.ContainerConfig.ExtraMounts) == 1
		}, ""},
		{"name trimmed", GroupChange{Name: ptr(" Y ")}, func(g store.Group) bool { return g.Name == "Y" }, ""},
		{"trigger normalised", GroupChange{Trigger: ptr("Bob")}, func(g store.Group) bool { return g.Trigger == "@Bob" }, ""},
		{"requires trigger", GroupChange{RequiresTrigger: ptr(false)}, func(g store.Group) bool { return !g.RequiresTrigger }, ""},
		{"model reset", GroupChange{Model: ptr("")}, func(g store.Group) bool { return g.ContainerConfig.Model == "" }, ""},
		{"timeout", GroupChange{Timeout: ptr("45m")}, func(g store.Group) bool { return g.ContainerConfig.Timeout == 45*time.Minute }, ""},
		{"timeout reset", GroupChange{Timeout: ptr("0")}, func(g store.Group) bool { return g.ContainerConfig.Timeout == 0 }, ""},
		{"mounts replaced", GroupChange{Mounts: &[]store.MountRequest{{HostPath: "/srv/b", ReadWrite: true}, {HostPath: "~/c", ContainerPath: "c"}}},
			func(g store.Group) bool {
				m := g.ContainerConfig.ExtraMounts
				return len(m) == 2 && m[0].HostPath == "/srv/b" && m[0].ReadWrite && m[1].ContainerPath == "c"
			}, ""},
		{"mounts cleared", GroupChange{Mounts: &[]store.MountRequest{}}, func(g store.Group) bool { return g.ContainerConfig.ExtraMounts == nil }, ""},

		{"empty name", GroupChange{Name: ptr("  ")}, nil, "a name is required"},
		{"empty trigger", GroupChange{Trigger: ptr(" ")}, nil, "the trigger must not be empty"},
		{"two-word trigger", GroupChange{Trigger: ptr("@a b")}, nil, "one word"},
		{"two-word model", GroupChange{Model: ptr("claude opus")}, nil, "one word"},
		{"short timeout", GroupChange{Timeout: ptr("10s")}, nil, "at least 1m"},
		{"bad timeout", GroupChange{Timeout: ptr("soon")}, nil, `timeout "soon"`},
		{"mount without host", GroupChange{Mounts: &[]store.MountRequest{{ContainerPath: "x"}}}, nil, "no host directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ChangeGroup(base, tt.c, "Andy")
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %+v, %v; want an ErrInvalid containing %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || !tt.check(got) {
				t.Errorf("got %+v, %v", got, err)
			}
		})
	}
}

func TestParseMount(t *testing.T) {
	tests := []struct {
		spec    string
		want    store.MountRequest
		wantErr string
	}{
		{"/srv/photos", store.MountRequest{HostPath: "/srv/photos"}, ""},
		{"/srv/photos:ro", store.MountRequest{HostPath: "/srv/photos"}, ""},
		{"/srv/photos:rw", store.MountRequest{HostPath: "/srv/photos", ReadWrite: true}, ""},
		{"/srv/photos:pics", store.MountRequest{HostPath: "/srv/photos", ContainerPath: "pics"}, ""},
		{"~/code:src:rw", store.MountRequest{HostPath: "~/code", ContainerPath: "src", ReadWrite: true}, ""},
		{" /srv/x:ro:ro ", store.MountRequest{HostPath: "/srv/x", ContainerPath: "ro"}, ""},
		{"", store.MountRequest{}, "no host directory"},
		{":rw", store.MountRequest{}, "no host directory"},
		{"/srv/x:", store.MountRequest{}, "container name after the colon is empty"},
		{"/a:b:c:rw", store.MountRequest{}, "want HOST[:CONTAINER][:ro|rw]"},
		{"/srv/x\n:y", store.MountRequest{}, "control characters"},
	}
	for _, tt := range tests {
		got, err := ParseMount(tt.spec)
		if tt.wantErr != "" {
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseMount(%q) = %+v, %v; want an ErrInvalid containing %q", tt.spec, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseMount(%q) = %+v, %v; want %+v", tt.spec, got, err, tt.want)
		}
		if back, err := ParseMount(FormatMount(got)); err != nil || back != got {
			t.Errorf("ParseMount(FormatMount(%+v)) = %+v, %v; want it back", got, back, err)
		}
	}
}
