package media

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridged-app/bridged/internal/store"
)

// inboxDir is the folder, inside the group's folder, media are saved to.
const inboxDir = "inbox"

// maxTranscribeBytes bounds the audio read back for a transcript.
const maxTranscribeBytes = 25 << 20

// timedOut is the error of a fetch that did not finish within
// Config.Timeout.
type timedOut struct{ after time.Duration }

func (e timedOut) Error() string { return fmt.Sprintf("no file within %s", e.after) }

// settleTimeout bounds the store write that settles a media.
const settleTimeout = 30 * time.Second

// process fetches, transcribes and settles m. A ctx that ends first leaves
// it pending, for the next start.
func (p *Pool) process(ctx context.Context, m store.Media) {
	log := p.log.With().Str("chat", string(m.Chat)).Int64("message_id", int64(m.MessageID)).Str("source", m.Source).Logger()
	state, placeholder, ok := p.fetch(ctx, log, m)
	if !ok {
		return // the daemon is stopping: it stays pending
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	settled, err := p.d.Store.Media.Settle(sctx, m.MessageID, state, placeholder)
	if err != nil {
		log.Error().Err(err).Msg("cannot settle media; it is fetched again at the next start")
		return
	}
	if c, ok := p.d.Fetchers[m.Source].(Cleaner); ok {
		c.Cleanup(m)
	}
	if settled {
		log.Debug().Str("state", string(state)).Str("placeholder", placeholder).Msg("media settled")
		p.d.Settled(m.Chat)
	}
}

// fetch saves m into its group's inbox and returns how it settles and its
// placeholder; ok is false when ctx ended first.
func (p *Pool) fetch(ctx context.Context, log zerolog.Logger, m store.Media) (state store.MediaState, placeholder string, ok bool) {
	failed := func(detail string) (store.MediaState, string, bool) {
		return store.MediaFailed, bracket(m.Label, detail), true
	}
	starts, err := p.d.Store.Media.Start(ctx, m.MessageID)
	switch {
	case ctx.Err() != nil:
		return "", "", false
	case errors.Is(err, store.ErrNotFound):
		return "", "", false // settled meanwhile (or its message is gone)
	case err != nil:
		log.Error().Err(err).Msg("cannot start a media fetch")
		return failed("download failed: the store did not answer")
	case starts > p.cfg.MaxStarts:
		log.Warn().Int("starts", starts).Msg("media fetch started too often without settling; giving up")
		return failed(fmt.Sprintf("download failed: gave up after %d tries", p.cfg.MaxStarts))
	}
	fetcher := p.d.Fetchers[m.Source]
	if fetcher == nil {
		return failed(fmt.Sprintf("download failed: no fetcher for %q", m.Source))
	}
	if m.Size > p.cfg.MaxBytes {
		return failed(fmt.Sprintf("not downloaded, %s is over the %s limit", HumanBytes(m.Size), HumanBytes(p.cfg.MaxBytes)))
	}
	g, err := p.d.Store.Groups.ByChat(ctx, m.Chat)
	if errors.Is(err, store.ErrNotFound) {
		return failed("not downloaded, the chat is no longer registered")
	} else if err != nil {
		if ctx.Err() != nil {
			return "", "", false
		}
		return failed("download failed: the store did not answer")
	}
	if err := p.cfg.Floor.Check(); err != nil {
		log.Warn().Err(err).Msg("media not downloaded: the disk is almost full")
		return failed("not downloaded, the disk of the bridged host is almost full; the owner is told")
	}
	name := SafeName(m.Name)
	rel := inboxDir + "/" + name
	var audio []byte
	for attempt := 0; ; attempt++ {
		audio, err = p.save(ctx, string(g.Folder), name, m, fetcher)
		// A download that timed out is not tried again: the chat's later
		// messages have waited long enough.
		if err == nil || ctx.Err() != nil || errors.Is(err, ErrTooLarge) || errors.As(err, new(timedOut)) || attempt == len(p.cfg.RetryDelays) {
			break
		}
		log.Warn().Err(err).Int("attempt", attempt+1).Msg("media fetch failed; trying again")
		if p.wait(ctx, p.cfg.RetryDelays[attempt]) != nil {
			break
		}
	}
	switch {
	case ctx.Err() != nil:
		return "", "", false
	case errors.Is(err, ErrTooLarge):
		log.Warn().Int64("limit", p.cfg.MaxBytes).Msg("media over the download limit; not saved")
		return failed(fmt.Sprintf("not downloaded, it is over the %s limit", HumanBytes(p.cfg.MaxBytes)))
	case err != nil:
		log.Warn().Err(err).Msg("cannot fetch media")
		return failed("download failed: " + oneLine(err.Error(), 120))
	}
	log.Debug().Str("group", string(g.Folder)).Str("file", rel).Msg("media saved")
	if !m.Voice || p.d.Transcriber == nil {
		return store.MediaSaved, bracket(m.Label, rel), true
	}
	text, d, err := p.transcribe(ctx, name, m, audio)
	if ctx.Err() != nil {
		return "", "", false
	}
	if err != nil {
		log.Warn().Err(err).Msg("no transcript for a voice note")
	}
	return store.MediaSaved, VoicePlaceholder(d, rel, text, err), true
}

// save writes m into the group's inbox as name: into a fresh temporary file
// (created exclusively, so a planted link is never written through), then
// renamed into place, replacing whatever the agent put at that name (also
// a file saved by a fetch the daemon did not live to settle: it is fetched
// again rather than trusted). For a voice note it returns the recording,
// read back from the daemon's own descriptor before the rename, so what is
// transcribed is what was fetched.
func (p *Pool) save(ctx context.Context, folder, name string, m store.Media, f Fetcher) (audio []byte, err error) {
	group, err := p.d.Home.Group(folder)
	if err != nil {
		return nil, fmt.Errorf("open group folder: %w", err)
	}
	defer group.Close()
	inbox, err := group.Dir(inboxDir)
	if err != nil {
		return nil, fmt.Errorf("open inbox: %w", err)
	}
	defer inbox.Close()
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmpName := ".download-" + hex.EncodeToString(rnd[:]) + ".tmp"
	tmp, err := inbox.Create(tmpName, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create temporary file: %w", err)
	}
	defer func() {
		if tmp != nil {
			_ = tmp.Close()
			_ = inbox.Remove(tmpName)
		}
	}()
	fctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	if err := f.Fetch(fctx, m, tmp, p.cfg.MaxBytes); err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return nil, timedOut{p.cfg.Timeout}
		}
		return nil, err
	}
	st, err := tmp.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat download: %w", err)
	}
	if st.Size() > p.cfg.MaxBytes {
		return nil, ErrTooLarge
	}
	if m.Voice && st.Size() <= maxTranscribeBytes {
		if audio, err = io.ReadAll(io.NewSectionReader(tmp, 0, st.Size())); err != nil {
			return nil, fmt.Errorf("read the recording back: %w", err)
		}
	}
	if err := tmp.Chmod(0o644); err != nil { // the umask may have narrowed it
		return nil, fmt.Errorf("chmod download: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return nil, fmt.Errorf("sync download: %w", err)
	}
	err = tmp.Close()
	tmp = nil
	if err == nil {
		err = inbox.Rename(tmpName, name)
	}
	if err != nil {
		_ = inbox.Remove(tmpName)
		return nil, fmt.Errorf("move download into place: %w", err)
	}
	return audio, nil
}

// transcribe transcribes the voice note audio; d is its length
// (announced, else read from the recording, else 0).
func (p *Pool) transcribe(ctx context.Context, name string, m store.Media, audio []byte) (text string, d time.Duration, err error) {
	d = time.Duration(m.Seconds) * time.Second
	if audio == nil {
		return "", d, fmt.Errorf("the recording is over %s", HumanBytes(maxTranscribeBytes))
	}
	if d == 0 {
		d = oggDuration(audio)
	}
	text, err = p.d.Transcriber.Transcribe(ctx, name, audio)
	if err == nil && strings.TrimSpace(text) == "" {
		err = errors.New("the transcript is empty")
	}
	return text, d, err
}
