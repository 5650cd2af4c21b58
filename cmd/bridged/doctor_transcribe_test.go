package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/bridged-app/bridged/internal/config"
)

func TestDoctorChecksTheTranscriptionEndpoint(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sk-good" {
			http.Error(w, "bad key", http.StatusUnauthorized)
			return
		}
		io.WriteString(w, `{"text":""}`)
	}))
	defer srv.Close()

	if c := checkTranscribe(context.Background(), &config.Config{}, nil); c.status != "ok" || !strings.Contains(c.detail, "off") {
		t.Errorf("unset: %+v; want ok, off", c)
	}
	good := &config.Config{TranscribeURL: srv.URL, TranscribeKey: "sk-good", TranscribeModel: "whisper-1"}
	if c := checkTranscribe(context.Background(), good, srv.Client()); c.status != "ok" {
		t.Errorf("good key: %+v; want ok", c)
	}
	bad := &config.Config{TranscribeURL: srv.URL, TranscribeKey: "sk-wrong-secret", TranscribeModel: "whisper-1"}
	c := checkTranscribe(context.Background(), bad, srv.Client())
	if c.status != "FAIL" || !strings.Contains(c.detail, "401") {
		t.Errorf("bad key: %+v; want FAIL naming the 401", c)
	}
	if strings.Contains(c.detail+c.hint, "sk-wrong-secret") {
		t.Errorf("the check prints the key: %+v", c)
	}
}
