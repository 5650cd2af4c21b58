package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bridged-app/bridged/internal/control"
)

// transcription is one request the fake transcription endpoint got.
type transcription struct {
	n     int    // 1 for the first request
	name  string // the file part's name
	model string
	audio []byte
}

// fakeTranscriber is an OpenAI-compatible speech-to-text endpoint on the
// host's loopback (POST /v1/audio/transcriptions, multipart, answering
// {"text": …}), which the daemon reaches as BRIDGED_TRANSCRIBE_URL. answer
// writes the answer to each request; got hears of every request as it
// arrives, before it is answered.
type fakeTranscriber struct {
	srv *httptest.Server
	got chan transcription
	mu  sync.Mutex
	n   int
}

func newFakeTranscriber(t *testing.T, answer func(tr transcription, w http.ResponseWriter, r *http.Request)) *fakeTranscriber {
	t.Helper()
	f := &fakeTranscriber{got: make(chan transcription, 10)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/audio/transcriptions" {
			t.Errorf("transcription endpoint got %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
			return
		}
		if err := r.ParseMultipartForm(32 << 20); err != nil {
			t.Errorf("transcription request: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		file, hdr, err := r.FormFile("file")
		if err != nil {
			t.Errorf("transcription request without a file: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		audio, _ := io.ReadAll(file)
		f.mu.Lock()
		f.n++
		tr := transcription{n: f.n, name: hdr.Filename, model: r.FormValue("model"), audio: audio}
		f.mu.Unlock()
		f.got <- tr
		answer(tr, w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// calls is how many requests came.
func (f *fakeTranscriber) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// next waits for the next request.
func (f *fakeTranscriber) next(t *testing.T, within time.Duration) transcription {
	t.Helper()
	select {
	case tr := <-f.got:
		return tr
	case <-time.After(within):
		t.Fatalf("no transcription request within %s", within)
		return transcription{}
	}
}

func answerText(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]string{"text": text})
}

// attachFile writes a file for the CLI to attach and returns its path.
func attachFile(t *testing.T, name string, content []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// smallPNG is a 3×2 PNG image.
func smallPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	img.Set(1, 1, color.RGBA{R: 200, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// inboxFile checks that the reply names a file in the main group's inbox/
// holding content, and returns its name.
func inboxFile(t *testing.T, e *env, reply string, content []byte) string {
	t.Helper()
	m := regexp.MustCompile(`inbox/([A-Za-z0-9._-]+)`).FindStringSubmatch(reply)
	if m == nil {
		t.Fatalf("reply %q names no file in inbox/", reply)
	}
	got, err := os.ReadFile(filepath.Join(e.home, "groups", "main", "inbox", m[1]))
	if err != nil {
		t.Fatalf("the file the prompt names: %v", err)
	}
	if !bytes.Equal(got, content) {
		t.Errorf("inbox/%s holds %d bytes; want the %d attached", m[1], len(got), len(content))
	}
	return m[1]
}

// uploadsLeft lists what is left in data/uploads.
func uploadsLeft(t *testing.T, e *env) []string {
	t.Helper()
	es, err := os.ReadDir(filepath.Join(e.home, "data", "uploads"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, d := range es {
		names = append(names, d.Name())
	}
	return names
}

// Files attached with `bridged chat --attach` reach the agent as WhatsApp
// media do: saved in the group's inbox/, named in the prompt, audio
// transcribed by the configured endpoint (or said to be missing when it
// fails), and the message answered either way.
func TestE2EMediaAttachments(t *testing.T) {
	parallel(t, light)
	tr := newFakeTranscriber(t, func(tr transcription, w http.ResponseWriter, r *http.Request) {
		if bytes.Contains(tr.audio, []byte("endpoint down")) {
			http.Error(w, `{"error":{"message":"model overloaded"}}`, http.StatusInternalServerError)
			return
		}
		answerText(w, "buy milk and call Bob")
	})
	e := newEnv(t, "--idle-timeout", "2s")
	e.extraEnv = append(e.extraEnv, "BRIDGED_TRANSCRIBE_URL="+tr.srv.URL)
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()

	t.Run("voice note", func(t *testing.T) {
		e := e.in(t)
		audio := []byte("OggS a voice note, not really")
		out := e.mustCLI("chat", "-m", "@Andy summarise", "--attach", attachFile(t, "note.ogg", audio), "main")
		if !strings.Contains(out, "@Andy summarise") || !strings.Contains(out, "[voice note") || !strings.Contains(out, "buy milk and call Bob") {
			t.Errorf("the agent saw %q; want the caption and the voice note's transcript", out)
		}
		got := tr.next(t, time.Second)
		if !bytes.Equal(got.audio, audio) {
			t.Errorf("the endpoint got %q; want the attached recording", got.audio)
		}
		inboxFile(t, e, out, audio)
	})

	t.Run("image", func(t *testing.T) {
		e := e.in(t)
		pic := smallPNG(t)
		out := e.mustCLI("chat", "-m", "@Andy what is this?", "--attach", attachFile(t, "chart.png", pic), "main")
		if !regexp.MustCompile(`\[image: inbox/[A-Za-z0-9._-]+chart\.png\]`).MatchString(out) {
			t.Errorf("the agent saw %q; want [image: inbox/…chart.png]", out)
		}
		inboxFile(t, e, out, pic)
	})

	t.Run("transcription fails", func(t *testing.T) {
		e := e.in(t)
		before := tr.calls()
		out, err := e.cli("chat", "-m", "@Andy listen", "--attach", attachFile(t, "memo.mp3", []byte("ID3 endpoint down")), "main")
		if err != nil {
			t.Fatalf("a voice note whose transcription failed was not answered: %v", err)
		}
		if !strings.Contains(out, "transcript missing") || !strings.Contains(out, "inbox/") {
			t.Errorf("the agent saw %q; want the voice note saved and its transcript said to be missing", out)
		}
		if tr.calls() != before+1 {
			t.Errorf("the endpoint got %d requests; want 1", tr.calls()-before)
		}
	})

	if left := uploadsLeft(t, e); len(left) != 0 {
		t.Errorf("uploads left once every media settled: %v", left)
	}
	d.stop(t)
}

// A daemon killed while a voice note is being transcribed takes the media
// up again at the next start: the endpoint is asked again, and the message
// is answered once, with that transcript.
func TestE2EMediaKill9WhileTranscribing(t *testing.T) {
	parallel(t, light)
	// The first request hangs until the daemon that sent it dies; the
	// next is answered.
	tr := newFakeTranscriber(t, func(tr transcription, w http.ResponseWriter, r *http.Request) {
		if tr.n == 1 {
			<-r.Context().Done()
			return
		}
		answerText(w, "second time lucky")
	})
	e := newEnv(t, "--idle-timeout", "2s")
	e.extraEnv = append(e.extraEnv, "BRIDGED_TRANSCRIBE_URL="+tr.srv.URL)
	e.mustCLI("groups", "add", "--tools", "full", "--name", "main", "--main", "local:main")
	d := e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := e.watchContainers(ctx)

	audio := []byte("OggS the first request hangs")
	id, err := control.NewClient(filepath.Join(e.home, "bridged.sock")).PostMessage(ctx, "local:main", "Alice", "@Andy summarise", attachFile(t, "note.ogg", audio))
	if err != nil {
		t.Fatalf("post with a file: %v", err)
	}
	first := tr.next(t, time.Minute)
	if first.n != 1 || !bytes.Equal(first.audio, audio) {
		t.Fatalf("first transcription request %d with %q; want the first, with the recording", first.n, first.audio)
	}
	if out := e.outSince("local:main", id); len(out) != 0 {
		t.Fatalf("answered before the transcript came: %+v", out)
	}
	d.kill9()

	d2 := e.start()
	second := tr.next(t, time.Minute)
	if second.n != 2 || !bytes.Equal(second.audio, audio) {
		t.Fatalf("transcription request %d with %q after the restart; want the second, with the recording", second.n, second.audio)
	}
	got := e.waitOut("local:main", id, 1, 2*time.Minute)
	if !strings.Contains(got[0].Text, "second time lucky") {
		t.Errorf("reply %q; want the transcript of the second request", got[0].Text)
	}
	w.waitRunning(t, 0, time.Minute)
	if n := len(e.outSince("local:main", id)); n != 1 {
		t.Errorf("the message was answered %d times; want exactly once: %+v", n, e.outSince("local:main", id))
	}
	if n := tr.calls(); n != 2 {
		t.Errorf("the endpoint got %d requests; want 2", n)
	}
	inboxFile(t, e, got[0].Text, audio)
	if left := uploadsLeft(t, e); len(left) != 0 {
		t.Errorf("uploads left once the media settled: %v", left)
	}
	d2.stop(t)
}
