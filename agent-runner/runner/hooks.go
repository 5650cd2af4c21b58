package runner

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/bridged-app/bridged/internal/claudecli"
	"github.com/rs/zerolog"
)

// bashHook returns the PreToolUse hook for Bash: it rewrites the command so
// the credential variables are unset before it runs, keeping every other
// field of the tool input.
func bashHook(prefix string, log zerolog.Logger) claudecli.HookFunc {
	return func(_ context.Context, in claudecli.HookInput) (any, error) {
		var input map[string]json.RawMessage
		if err := json.Unmarshal(in.ToolInput, &input); err != nil || input == nil {
			// Nothing we can rewrite; the tool will fail on its own input.
			log.Warn().Str("tool", in.ToolName).Msg("bash hook: tool input is not an object")
			return struct{}{}, nil
		}
		var command string
		if err := json.Unmarshal(input["command"], &command); err != nil {
			log.Warn().Str("tool", in.ToolName).Msg("bash hook: no command string")
			return struct{}{}, nil
		}
		rewritten, err := json.Marshal(prefix + command)
		if err != nil {
			return nil, fmt.Errorf("encode command: %w", err)
		}
		input["command"] = rewritten
		updated, err := json.Marshal(input)
		if err != nil {
			return nil, fmt.Errorf("encode tool input: %w", err)
		}
		return claudecli.HookOutput{HookSpecificOutput: claudecli.PreToolUseOutput{
			HookEventName:            claudecli.HookPreToolUse,
			PermissionDecision:       "allow",
			PermissionDecisionReason: "credentials unset before the command runs",
			UpdatedInput:             updated,
		}}, nil
	}
}

// archiver writes the transcript to conversations/ before compaction.
type archiver struct {
	dir       string // <workdir>/conversations
	assistant string
	loc       *time.Location
	now       func() time.Time
	log       zerolog.Logger
}

// hook answers PreCompact: archive, then let compaction continue whatever
// happened (a failed archive is logged, never blocks the agent).
func (a *archiver) hook(_ context.Context, in claudecli.HookInput) (any, error) {
	path, err := a.archive(in.TranscriptPath)
	if err != nil {
		a.log.Warn().Err(err).Msg("archive conversation before compaction")
	} else if path != "" {
		a.log.Info().Str("file", path).Str("trigger", in.Trigger).Msg("conversation archived before compaction")
	}
	yes := true
	return claudecli.HookOutput{Continue: &yes}, nil
}

type turn struct {
	user bool
	text string
}

const (
	maxArchivedText  = 2000
	maxTitleBytes    = 50
	maxTranscriptRow = 64 << 20
)

// archive writes the conversation in transcriptPath to a new markdown file
// and returns its path ("" when there was nothing to archive).
func (a *archiver) archive(transcriptPath string) (string, error) {
	if transcriptPath == "" {
		return "", errors.New("no transcript path")
	}
	turns, summary, err := readTranscript(transcriptPath)
	if err != nil {
		return "", err
	}
	if len(turns) == 0 {
		return "", nil
	}
	now := a.now().In(a.loc)
	title := summary
	if title == "" {
		title = titleFrom(turns)
	}
	slug := slugify(title)
	if slug == "" {
		slug = "conversation-" + now.Format("1504")
	}
	if err := os.MkdirAll(a.dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", a.dir, err)
	}
	var b strings.Builder
	heading := summary
	if heading == "" {
		heading = "Conversation"
	}
	fmt.Fprintf(&b, "# %s\n\nArchived: %s\n\n---\n\n", heading, now.Format("Jan 2, 2006 3:04 PM MST"))
	for _, t := range turns {
		who := a.assistant
		if t.user {
			who = "User"
		}
		fmt.Fprintf(&b, "**%s**: %s\n\n", who, truncate(t.text, maxArchivedText))
	}
	base := now.Format("2006-01-02") + "-" + slug
	for i := 1; ; i++ {
		name := base + ".md"
		if i > 1 {
			name = fmt.Sprintf("%s-%d.md", base, i)
		}
		path := filepath.Join(a.dir, name)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("create %s: %w", path, err)
		}
		_, werr := f.WriteString(b.String())
		cerr := f.Close()
		if werr != nil || cerr != nil {
			return "", fmt.Errorf("write %s: %w", path, errors.Join(werr, cerr))
		}
		return path, nil
	}
}

// readTranscript extracts the user and assistant texts from a session JSONL
// and the session's summary, if the transcript carries one.
func readTranscript(path string) ([]turn, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("open transcript: %w", err)
	}
	defer f.Close()
	var turns []turn
	var summary string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxTranscriptRow)
	for sc.Scan() {
		var row struct {
			Type        string          `json:"type"`
			Summary     string          `json:"summary"`
			IsMeta      bool            `json:"isMeta"`
			IsSynthetic bool            `json:"isSynthetic"`
			Message     json.RawMessage `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &row) != nil {
			continue
		}
		switch row.Type {
		case "summary":
			if row.Summary != "" {
				summary = row.Summary
			}
		case "user", "assistant":
			if row.IsMeta || row.IsSynthetic || len(row.Message) == 0 {
				continue
			}
			var msg claudecli.UserMessage
			if json.Unmarshal(row.Message, &msg) != nil {
				continue
			}
			text := strings.TrimSpace(msg.Text())
			if text == "" {
				continue // tool calls and tool results
			}
			turns = append(turns, turn{user: row.Type == "user", text: text})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, "", fmt.Errorf("read transcript: %w", err)
	}
	return turns, summary, nil
}

var (
	tagPattern     = regexp.MustCompile(`<[^>]*>`)
	contextPattern = regexp.MustCompile(`(?s)<context[^>]*/>`)
	nonSlug        = regexp.MustCompile(`[^a-z0-9]+`)
)

// titleFrom names a conversation after its first user message, read as
// plain text (the prompt's XML markup removed).
func titleFrom(turns []turn) string {
	for _, t := range turns {
		if !t.user {
			continue
		}
		s := contextPattern.ReplaceAllString(t.text, " ")
		s = html.UnescapeString(tagPattern.ReplaceAllString(s, " "))
		s = strings.Join(strings.Fields(s), " ")
		if s != "" {
			return s
		}
	}
	return ""
}

// slugify lower-cases s, turns runs of anything but letters and digits into
// '-', and cuts it to maxTitleBytes.
func slugify(s string) string {
	s = nonSlug.ReplaceAllString(strings.ToLower(s), "-")
	s = strings.Trim(s, "-")
	if len(s) > maxTitleBytes {
		s = strings.TrimRight(s[:maxTitleBytes], "-")
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
