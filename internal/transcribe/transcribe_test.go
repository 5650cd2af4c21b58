package transcribe

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestTranscribeSendsFileAndModel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/audio/transcriptions" || r.Method != http.MethodPost {
			http.Error(w, "wrong route", http.StatusNotFound)
			return
		}
		if r.Header.Get("Authorization") != "Bearer sk-secret" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		f, h, err := r.FormFile("file")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(f)
		if h.Filename != "note.ogg" || string(b) != "OggS-audio" || r.FormValue("model") != "whisper-1" {
			http.Error(w, "bad form", http.StatusBadRequest)
			return
		}
		io.WriteString(w, `{"text":" buy milk "}`)
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL + "/", Key: "sk-secret", Model: "whisper-1"}
	got, err := c.Transcribe(context.Background(), "note.ogg", []byte("OggS-audio"))
	if err != nil || got != "buy milk" {
		t.Fatalf("Transcribe = %q, %v; want %q", got, err, "buy milk")
	}
}

func TestTranscribeErrorsNeverCarryTheKey(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom "+r.Header.Get("Authorization"), http.StatusInternalServerError)
	}))
	defer srv.Close()
	c := &Client{URL: srv.URL, Key: "sk-secret", Model: "m"}
	_, err := c.Transcribe(context.Background(), "a.ogg", []byte("x"))
	if err == nil || !strings.Contains(err.Error(), "500") || strings.Contains(err.Error(), "sk-secret") {
		t.Fatalf("err = %v; want a 500 error without the key", err)
	}
	srv.Close()
	_, err = c.Transcribe(context.Background(), "a.ogg", []byte("x"))
	if err == nil || strings.Contains(err.Error(), "sk-secret") {
		t.Fatalf("unreachable err = %v", err)
	}
}

func TestTranscribeRefusesTooLarge(t *testing.T) {
	called := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { called = true }))
	defer srv.Close()
	c := &Client{URL: srv.URL, MaxBytes: 4}
	_, err := c.Transcribe(context.Background(), "a.ogg", []byte("12345"))
	if !errors.Is(err, ErrTooLarge) || called {
		t.Fatalf("err = %v, called = %v; want ErrTooLarge without a request", err, called)
	}
}

func TestTranscribeTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	c := &Client{URL: srv.URL, Timeout: 50 * time.Millisecond}
	_, err := c.Transcribe(context.Background(), "a.ogg", []byte("x"))
	if err == nil || !strings.Contains(err.Error(), "no answer within") {
		t.Fatalf("err = %v; want a timeout", err)
	}
}

func TestTranscribeAnswerWithoutText(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"error":"nope"}`)
	}))
	defer srv.Close()
	_, err := (&Client{URL: srv.URL}).Transcribe(context.Background(), "a.ogg", []byte("x"))
	if err == nil || !strings.Contains(err.Error(), "no text") {
		t.Fatalf("err = %v", err)
	}
}

func TestCheckSendsAudioTheEndpointAccepts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, h, err := r.FormFile("file")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b, _ := io.ReadAll(f)
		if h.Filename != "check.wav" || len(b) != 44+3200 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WAVE" {
			http.Error(w, "not a wav", http.StatusBadRequest)
			return
		}
		io.WriteString(w, `{"text":""}`)
	}))
	defer srv.Close()
	if err := (&Client{URL: srv.URL, Model: "m"}).Check(context.Background()); err != nil {
		t.Fatalf("Check = %v", err)
	}
}
