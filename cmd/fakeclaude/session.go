package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/google/uuid"
)

// errNoSession means --resume named a session HOME does not hold.
var errNoSession = errors.New("no such session")

// session is the transcript file of one conversation:
// <config dir>/projects/<slug of the cwd it was made in>/<id>.jsonl, one JSON
// entry per line, user and assistant entries chained by uuid/parentUuid.
type session struct {
	id   string
	path string
	cwd  string

	errw io.Writer // where write failures are reported

	mu   sync.Mutex
	last string // uuid of the newest entry of the chain
}

// slug is the project folder name for cwd: every non-alphanumeric character
// becomes '-'.
func slug(cwd string) string {
	var b strings.Builder
	for _, r := range cwd {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	return b.String()
}

func newSession(configDir, cwd string) *session {
	id := uuid.NewString()
	return &session{id: id, cwd: cwd, path: filepath.Join(configDir, "projects", slug(cwd), id+".jsonl")}
}

// resumeSession finds id's transcript in any project folder and continues it
// after its last entry, or after resumeAt (a message uuid) when given.
func resumeSession(configDir, id, resumeAt, cwd string) (*session, error) {
	if id == "" || strings.ContainsAny(id, `/\`) || id == "." || id == ".." {
		return nil, errNoSession
	}
	matches, err := filepath.Glob(filepath.Join(configDir, "projects", "*", id+".jsonl"))
	if err != nil || len(matches) == 0 {
		return nil, errNoSession
	}
	s := &session{id: id, cwd: cwd, path: matches[0]}
	f, err := os.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("open session %s: %w", id, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	found := resumeAt == ""
	for sc.Scan() {
		var e struct {
			UUID string `json:"uuid"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.UUID == "" {
			continue
		}
		s.last = e.UUID
		if e.UUID == resumeAt {
			found = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read session %s: %w", id, err)
	}
	if !found {
		return nil, fmt.Errorf("--resume-session-at: no message with uuid %s in session %s", resumeAt, id)
	}
	if resumeAt != "" {
		s.last = resumeAt
	}
	return s, nil
}

// append writes entry to the transcript, chaining it after the last one.
// entry must carry "uuid"; "parentUuid" is set here.
func (s *session) append(entry map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == "" {
		entry["parentUuid"] = nil
	} else {
		entry["parentUuid"] = s.last
	}
	if u, ok := entry["uuid"].(string); ok {
		s.last = u
	}
	b, err := json.Marshal(entry)
	if err == nil {
		err = os.MkdirAll(filepath.Dir(s.path), 0o700)
	}
	var f *os.File
	if err == nil {
		f, err = os.OpenFile(s.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	}
	if err == nil {
		_, err = f.Write(append(b, '\n'))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil && s.errw != nil {
		fmt.Fprintf(s.errw, "Error: cannot write the session transcript: %v\n", err)
	}
}

func (s *session) lastUUID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// entry builds a transcript entry; an empty id gets a fresh uuid.
func (f *fake) entry(typ, id string, message any) map[string]any {
	if id == "" {
		id = uuid.NewString()
	}
	entrypoint := getenv(f.env, "CLAUDE_CODE_ENTRYPOINT")
	if entrypoint == "" {
		entrypoint = "sdk-cli"
	}
	return map[string]any{
		"isSidechain": false, "type": typ, "message": message, "uuid": id,
		"timestamp": timestamp(), "userType": "external", "entrypoint": entrypoint,
		"cwd": f.cwd, "sessionId": f.sess.id, "version": cliVersion,
	}
}
