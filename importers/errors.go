package importers

import (
	"errors"
	"fmt"
)

// ErrNotFormat is wrapped by the errors that say an input is not of the
// format it was read as (or of any format, for detection).
var ErrNotFormat = errors.New("not a recognized trace")

// InputError says what is wrong with an input and where: a line (text
// formats) or a byte offset (JSON), counted in the decompressed content.
type InputError struct {
	File   string
	Line   int64 // 1-based; 0 when the place is a byte offset
	Offset int64 // byte offset, when Line is 0
	Msg    string
	Err    error // ErrNotFormat, or the cause
}

func (e *InputError) Error() string {
	var at string
	switch {
	case e.Line > 0:
		at = fmt.Sprintf("%s:%d", e.File, e.Line)
	default:
		at = fmt.Sprintf("%s: byte %d", e.File, e.Offset)
	}
	if e.Err != nil && !errors.Is(e.Err, ErrNotFormat) {
		return fmt.Sprintf("%s: %s: %v", at, e.Msg, e.Err)
	}
	return at + ": " + e.Msg
}

func (e *InputError) Unwrap() error { return e.Err }

// notFormat returns an InputError wrapping ErrNotFormat.
func notFormat(file string, line, offset int64, format string, a ...any) error {
	return &InputError{File: file, Line: line, Offset: offset, Msg: fmt.Sprintf(format, a...), Err: ErrNotFormat}
}
