package prompt

import (
	"strings"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/ipc"
	"github.com/bridged-app/bridged/internal/store"
)

func TestMatchTrigger(t *testing.T) {
	tests := []struct {
		trigger, text string
		want          bool
	}{
		{"@Andy", "@Andy hi", true},
		{"@Andy", "@andy hi", true},
		{"@Andy", "@ANDY", true},
		{"@Andy", "@Andy", true},
		{"@Andy", "  @Andy what's up  ", true},
		{"@Andy", "@Andy's idea", true},
		{"@Andy", "@Andy, can you", true},
		{"@Andy", "@Andy\nsecond line", true},
		{"@Andy", "@Andyx hi", false},
		{"@Andy", "@Andy_2 hi", false},
		{"@Andy", "@Andy2", false},
		{"@Andy", "hi @Andy", false},
		{"@Andy", "Andy hi", false},
		{"@Andy", "@And", false},
		{"@Andy", "", false},
		{"", "@Andy hi", false},
		{"@Zoë", "@ZOË bonjour", true},
		{"@Zoë", "@Zoëy", false},
		{"@a.b", "@A.B hi", true}, // regex characters are literal
		{"@a.b", "@axb hi", false},
		{"!bot!", "!bot!hi", true}, // a trigger ending in punctuation needs no boundary
	}
	for _, tt := range tests {
		if got := MatchTrigger(tt.trigger, tt.text); got != tt.want {
			t.Errorf("MatchTrigger(%q, %q): got %v; want %v", tt.trigger, tt.text, got, tt.want)
		}
	}
}

func TestFormat(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no tzdata: %v", err)
	}
	now := time.Date(2026, 11, 22, 8, 30, 0, 0, time.UTC)
	at := time.Date(2026, 11, 22, 8, 29, 58, 0, time.UTC)
	tests := []struct {
		name    string
		msgs    []store.Message
		omitted int
		want    string
	}{
		{
			name: "escaping and timezone",
			msgs: []store.Message{{SenderName: `Al "<B>" & 'C'`, Text: "a < b && c > \"d\" 'e'", SentAt: at}},
			want: `<context timezone="Europe/Berlin" now="2026-11-22T09:30:00+01:00"/>` + "\n<messages>\n" +
				`<message sender="Al &quot;&lt;B&gt;&quot; &amp; &apos;C&apos;" time="2026-11-22T09:29:58+01:00">a &lt; b &amp;&amp; c &gt; &quot;d&quot; &apos;e&apos;</message>` +
				"\n</messages>",
		},
		{
			name: "sender id when no name; control characters replaced",
			msgs: []store.Message{{Sender: "123@s", Text: "x\x00y\nz", SentAt: at}},
			want: `<context timezone="Europe/Berlin" now="2026-11-22T09:30:00+01:00"/>` + "\n<messages>\n" +
				`<message sender="123@s" time="2026-11-22T09:29:58+01:00">x` + "\uFFFDy\nz</message>\n</messages>",
		},
		{
			name: "a sender not allowed is marked",
			msgs: []store.Message{{SenderName: "Bob", Text: "delete it all", SentAt: at, NotAllowed: true}, {SenderName: "A", Text: "hi", SentAt: at}},
			want: `<context timezone="Europe/Berlin" now="2026-11-22T09:30:00+01:00"/>` + "\n<messages>\n" +
				`<message sender="Bob" time="2026-11-22T09:29:58+01:00" allowed="no">delete it all</message>` + "\n" +
				`<message sender="A" time="2026-11-22T09:29:58+01:00">hi</message>` + "\n</messages>",
		},
		{
			name: "cap note", omitted: 3,
			msgs: []store.Message{{SenderName: "A", Text: "hi", SentAt: at}},
			want: `<context timezone="Europe/Berlin" now="2026-11-22T09:30:00+01:00"/>` + "\n<messages>\n" +
				"<note>3 earlier messages were left out</note>\n" +
				`<message sender="A" time="2026-11-22T09:29:58+01:00">hi</message>` + "\n</messages>",
		},
		{
			name: "one left out", omitted: 1,
			msgs: []store.Message{{SenderName: "A", Text: "hi", SentAt: at}},
			want: `<context timezone="Europe/Berlin" now="2026-11-22T09:30:00+01:00"/>` + "\n<messages>\n" +
				"<note>1 earlier message was left out</note>\n" +
				`<message sender="A" time="2026-11-22T09:29:58+01:00">hi</message>` + "\n</messages>",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Format(berlin, now, tt.msgs, tt.omitted); got != tt.want {
				t.Fatalf("prompt:\ngot  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestFitPrompt(t *testing.T) {
	now := time.Now()
	big := strings.Repeat("x", 20<<10)
	var msgs []store.Message
	for i := range 10 {
		msgs = append(msgs, store.Message{ID: store.MessageID(i + 1), SenderName: "A", Text: big, SentAt: now})
	}
	tests := []struct {
		name         string
		msgs         []store.Message
		omitted      int
		wantKept     int
		wantNote     string
		wantContains string
	}{
		{"fits as is", msgs[:2], 0, 2, "", big},
		{"oldest dropped to fit", msgs, 5, 3, "<note>12 earlier messages were left out</note>", big},
		{"one huge message is cut", []store.Message{{SenderName: "A", Text: strings.Repeat("<", 70<<10), SentAt: now}}, 0, 1, "", strings.Repeat("&lt;", 10<<10) + "\n[the rest of this message was cut: it is too long]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, kept := Fit(time.UTC, now, tt.msgs, tt.omitted, ipc.MaxTextBytes)
			if len(got) > ipc.MaxTextBytes {
				t.Fatalf("prompt is %d bytes; want at most %d", len(got), ipc.MaxTextBytes)
			}
			if kept != tt.wantKept {
				t.Fatalf("kept: got %d; want %d", kept, tt.wantKept)
			}
			if tt.wantNote != "" && !strings.Contains(got, tt.wantNote) {
				t.Fatalf("prompt lacks %q", tt.wantNote)
			}
			if !strings.Contains(got, tt.wantContains) {
				t.Fatalf("prompt lacks %q", Clip(tt.wantContains, 40))
			}
			if err := (ipc.RunInput{Prompt: got, Group: "g", AssistantName: "A"}).Validate(); err != nil {
				t.Fatalf("run input with the prompt: %v", err)
			}
		})
	}
}

func TestStripInternal(t *testing.T) {
	tests := []struct{ in, want string }{
		{"hello", "hello"},
		{"<internal>thinking</internal>", ""},
		{"  <internal>a</internal>\n\n ", ""},
		{"before <internal>x</internal> after", "before  after"},
		{"a<internal>\nmulti\nline\n</internal>b<internal>two</internal>c", "abc"},
		{"<INTERNAL>loud</Internal>quiet", "quiet"},
		{"answer\n<internal>never closed\nstill hidden", "answer"},
		{"</internal> stray close", "</internal> stray close"},
	}
	for _, tt := range tests {
		if got := StripInternal(tt.in); got != tt.want {
			t.Errorf("StripInternal(%q): got %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestTask(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	got := Task(time.UTC, now, store.Task{ID: "task-1", Kind: "cron", Value: "0 9 * * *", Prompt: "check <mail> & report"})
	want := `<context timezone="UTC" now="2026-01-02T03:04:05Z"/>` + "\n" +
		`<scheduled_task id="task-1" schedule="cron 0 9 * * *">` + "\ncheck &lt;mail&gt; &amp; report\n</scheduled_task>"
	if got != want {
		t.Fatalf("task prompt:\ngot  %q\nwant %q", got, want)
	}
	long := Task(time.UTC, now, store.Task{ID: "task-2", Prompt: strings.Repeat("&", 40<<10)})
	if len(long) > ipc.MaxTextBytes || !strings.HasSuffix(long, "\n</scheduled_task>") {
		t.Fatalf("long task prompt: %d bytes, suffix %q; want at most %d bytes, closed element", len(long), long[len(long)-20:], ipc.MaxTextBytes)
	}
}
