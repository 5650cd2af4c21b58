package ipc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxTextBytes bounds any message text crossing the IPC boundary.
const MaxTextBytes = 64 << 10

// ErrInvalid is wrapped by every decoding and validation error.
var ErrInvalid = errors.New("invalid ipc payload")

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// decodeStrict decodes data into v, rejecting unknown fields and trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalidf("%v", err)
	}
	if dec.More() {
		return invalidf("trailing data after JSON object")
	}
	return nil
}

func checkText(field, s string, required bool) error {
	if required && strings.TrimSpace(s) == "" {
		return invalidf("%s is empty", field)
	}
	if len(s) > MaxTextBytes {
		return invalidf("%s is %d bytes, over the %d-byte limit", field, len(s), MaxTextBytes)
	}
	if !utf8.ValidString(s) {
		return invalidf("%s is not valid UTF-8", field)
	}
	return nil
}
