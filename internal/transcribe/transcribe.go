// Package transcribe turns a voice note into text through an OpenAI-compatible
// speech-to-text endpoint (POST <url>/v1/audio/transcriptions, multipart form
// with the fields "file" and "model", answer {"text": "…"}). That one shape
// covers OpenAI, Groq and local servers (whisper.cpp's server, faster-whisper
// servers), so an owner can keep audio on the box.
//
// Decisions: a request has a deadline (Client.Timeout, default 60s) and audio
// larger than Client.MaxBytes (default 25 MiB, OpenAI's own limit) is refused
// before anything is sent. The key is sent only as the Authorization header; it
// never appears in an error, since errors are logged and shown to the agent.
package transcribe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"time"
)

// Defaults of a Client's zero-valued limits.
const (
	DefaultTimeout  = 60 * time.Second
	DefaultMaxBytes = 25 << 20
)

// ErrTooLarge is returned for audio above the size cap.
var ErrTooLarge = errors.New("audio too large to transcribe")

// Client calls one transcription endpoint.
type Client struct {
	URL      string // base URL, e.g. https://api.openai.com; "/v1/audio/transcriptions" is appended
	Key      string // bearer token; empty sends none (local servers)
	Model    string // e.g. whisper-1
	Timeout  time.Duration
	MaxBytes int64
	HTTP     *http.Client // nil: http.DefaultClient
}

func (c *Client) endpoint() string {
	u := strings.TrimRight(c.URL, "/")
	if strings.HasSuffix(u, "/v1/audio/transcriptions") {
		return u
	}
	return u + "/v1/audio/transcriptions"
}

// Transcribe sends audio (named name, e.g. "note.ogg") and returns its text.
func (c *Client) Transcribe(ctx context.Context, name string, audio []byte) (string, error) {
	max := c.MaxBytes
	if max <= 0 {
		max = DefaultMaxBytes
	}
	if int64(len(audio)) > max {
		return "", fmt.Errorf("%w (%d bytes, limit %d)", ErrTooLarge, len(audio), max)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	fw, err := w.CreateFormFile("file", name)
	if err != nil {
		return "", err
	}
	if _, err := fw.Write(audio); err != nil {
		return "", err
	}
	if err := w.WriteField("model", c.Model); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint(), &body)
	if err != nil {
		return "", fmt.Errorf("transcription endpoint: bad URL")
	}
	req.Header.Set("Content-Type", w.FormDataContentType())
	if c.Key != "" {
		req.Header.Set("Authorization", "Bearer "+c.Key)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("transcription endpoint: no answer within %s", timeout)
		}
		return "", fmt.Errorf("transcription endpoint unreachable")
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("transcription endpoint: reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("transcription endpoint answered %s", resp.Status)
	}
	var out struct {
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Text == nil {
		return "", fmt.Errorf("transcription endpoint: answer has no text")
	}
	return strings.TrimSpace(*out.Text), nil
}

// Check asks the endpoint to transcribe a tenth of a second of silence: it
// answers nil when the endpoint is reachable, accepts the key and the model,
// and answers in the expected shape.
func (c *Client) Check(ctx context.Context) error {
	_, err := c.Transcribe(ctx, "check.wav", silentWAV(1600))
	return err
}

// silentWAV is n samples of 16 kHz mono 16-bit PCM silence.
func silentWAV(n int) []byte {
	data := 2 * n
	b := make([]byte, 44+data)
	le32 := func(o, v int) { b[o], b[o+1], b[o+2], b[o+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24) }
	le16 := func(o, v int) { b[o], b[o+1] = byte(v), byte(v>>8) }
	copy(b[0:], "RIFF")
	le32(4, 36+data)
	copy(b[8:], "WAVEfmt ")
	le32(16, 16)
	le16(20, 1) // PCM
	le16(22, 1) // mono
	le32(24, 16000)
	le32(28, 32000)
	le16(32, 2)
	le16(34, 16)
	copy(b[36:], "data")
	le32(40, data)
	return b
}
