package dashboard

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

const (
	// cookieName is the session cookie.
	cookieName = "bridged_dashboard"
	// LoginTTL is how long a login link may wait for its one use.
	LoginTTL = 10 * time.Minute
	// SessionTTL is how long a session lasts after its login.
	SessionTTL = 24 * time.Hour
	// maxSessions bounds the sessions kept: the oldest goes first.
	maxSessions = 16
	// maxCodes bounds the login links waiting.
	maxCodes = 16
)

// session is one logged-in browser.
type session struct {
	csrf    string
	expires time.Time
}

// auth keeps the login links waiting for their use and the sessions, by
// the SHA-256 of their secret (the secrets themselves are not kept).
type auth struct {
	mu       sync.Mutex
	now      func() time.Time
	codes    map[string]time.Time
	sessions map[string]*session
}

func newAuth(now func() time.Time) *auth {
	return &auth{now: now, codes: map[string]time.Time{}, sessions: map[string]*session{}}
}

func secret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// pathSecret returns the secret of the dashboard's path: the one kept in
// file, or a new one kept there (temp file, fsync, rename; mode 0600). With
// no file, a new one each time. A file that holds no valid secret is
// replaced.
func pathSecret(file string) (string, error) {
	if file == "" {
		return secret()[:22], nil
	}
	if b, err := os.ReadFile(file); err == nil && validPathSecret(strings.TrimSpace(string(b))) {
		return strings.TrimSpace(string(b)), nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("dashboard path: %w", err)
	}
	s := secret()[:22] // 132 bits
	tmp, err := os.CreateTemp(filepath.Dir(file), ".dashboard-path-*")
	if err != nil {
		return "", fmt.Errorf("dashboard path: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err = tmp.WriteString(s + "\n"); err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		return "", fmt.Errorf("dashboard path: %w", err)
	}
	return s, nil
}

// validPathSecret reports whether s is a path secret as pathSecret makes
// them: 22 or more base64url characters.
func validPathSecret(s string) bool {
	if len(s) < 22 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func digest(s string) string {
	h := sha256.Sum256([]byte(s))
	return string(h[:])
}

// newCode makes a one-time login code.
func (a *auth) newCode() (string, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	a.expireLocked(now)
	for len(a.codes) >= maxCodes {
		a.dropOldestCodeLocked()
	}
	code := secret()
	exp := now.Add(LoginTTL)
	a.codes[digest(code)] = exp
	return code, exp
}

// login spends code and returns a new session's secret ("" when the code is
// unknown, spent or expired).
func (a *auth) login(code string) string {
	if code == "" {
		return ""
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	a.expireLocked(now)
	d := digest(code)
	if _, ok := a.codes[d]; !ok {
		return ""
	}
	delete(a.codes, d)
	for len(a.sessions) >= maxSessions {
		a.dropOldestSessionLocked()
	}
	id := secret()
	a.sessions[digest(id)] = &session{csrf: secret(), expires: now.Add(SessionTTL)}
	return id
}

// session returns the request's session, or nil.
func (a *auth) session(r *http.Request) *session {
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.expireLocked(a.now())
	return a.sessions[digest(c.Value)]
}

// logout ends the request's session.
func (a *auth) logout(r *http.Request) {
	if c, err := r.Cookie(cookieName); err == nil {
		a.mu.Lock()
		delete(a.sessions, digest(c.Value))
		a.mu.Unlock()
	}
}

func (a *auth) expireLocked(now time.Time) {
	for k, exp := range a.codes {
		if !now.Before(exp) {
			delete(a.codes, k)
		}
	}
	for k, s := range a.sessions {
		if !now.Before(s.expires) {
			delete(a.sessions, k)
		}
	}
}

func (a *auth) dropOldestCodeLocked() {
	var oldest string
	var at time.Time
	for k, exp := range a.codes {
		if oldest == "" || exp.Before(at) {
			oldest, at = k, exp
		}
	}
	delete(a.codes, oldest)
}

func (a *auth) dropOldestSessionLocked() {
	var oldest string
	var at time.Time
	for k, s := range a.sessions {
		if oldest == "" || s.expires.Before(at) {
			oldest, at = k, s.expires
		}
	}
	delete(a.sessions, oldest)
}

// sameOrigin says whether a POST comes from a page of the dashboard's own
// origin: its Origin header, when sent, names the host it was sent to; a
// browser that sends none must say same-origin in Sec-Fetch-Site, when it
// sends that.
func sameOrigin(r *http.Request) bool {
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && u.Scheme == "http" && u.Host == r.Host && u.Path == ""
	}
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" {
		return s == "same-origin"
	}
	return true
}

// validCSRF compares a form's token with the session's in constant time.
func validCSRF(s *session, token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(s.csrf), []byte(token)) == 1
}
