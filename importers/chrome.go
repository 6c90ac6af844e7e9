package importers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// chromeEvent is one event of the Chrome trace event format (the
// "JSON Object Format" of Google's Trace Event Format document): the
// fields Horovod and Kineto write. Fields it does not name are ignored;
// args is kept raw and decoded only where an importer needs it.
type chromeEvent struct {
	Name string          `json:"name"`
	Cat  string          `json:"cat"`
	Ph   string          `json:"ph"`
	Ts   json.Number     `json:"ts"`
	Dur  json.Number     `json:"dur"`
	Pid  json.RawMessage `json:"pid"`
	Tid  json.RawMessage `json:"tid"`
	Args json.RawMessage `json:"args"`
}

func (e *chromeEvent) reset() { *e = chromeEvent{} }

// chromeReader streams the events of a Chrome trace: a bare JSON array of
// events (Horovod), or an object whose "traceEvents" array holds them
// (Kineto), whose other members are handed to onKey. It never holds more
// than one event.
type chromeReader struct {
	in    *input
	dec   *json.Decoder
	state int
	// onKey decodes (or skips) a top-level member other than traceEvents.
	onKey func(key string, dec *json.Decoder) error
	// events counts events decoded; typeErrs those skipped because a
	// field had an unexpected type.
	events, typeErrs int64
	// sawEvents: the object held a traceEvents array.
	sawEvents bool
	// end says how the input ended when not cleanly: "" when whole.
	end string
	// unclosed: the event array ended after a complete event without its
	// closing bracket (older Horovod versions always write so).
	unclosed bool
	// bare: the trace is a bare array of events (no enclosing object).
	bare bool
	// closed: the top-level value was read to its end.
	closed bool
	tail   *tailReader
}

const (
	chromeStart = iota
	chromeArray
	chromeKeys
	chromeDone
)

func newChromeReader(in *input) *chromeReader {
	tail := &tailReader{r: in.r}
	dec := json.NewDecoder(tail)
	dec.UseNumber()
	return &chromeReader{in: in, dec: dec, tail: tail}
}

// tailReader remembers the last byte other than white space read through
// it: an array left open after a comma is how older Horovod versions end
// their timelines; one left open after an event was cut (newer versions
// close it after every event).
type tailReader struct {
	r    io.Reader
	last byte
}

func (t *tailReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	for i := n - 1; i >= 0; i-- {
		if c := p[i]; c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			t.last = c
			break
		}
	}
	return n, err
}

// start reads the opening of the trace: want is '[' (a bare array), '{'
// (an object) or 0 (either). It returns a not-the-format error.
func (c *chromeReader) start(want byte, format string) error {
	tok, err := c.dec.Token()
	if err != nil {
		return notFormat(c.in.path, 0, c.dec.InputOffset(), "not a %s: expected JSON, %s", format, jsonErrText(err))
	}
	d, ok := tok.(json.Delim)
	switch {
	case ok && d == '[' && (want == '[' || want == 0):
		c.state, c.bare, c.sawEvents = chromeArray, true, true
	case ok && d == '{' && (want == '{' || want == 0):
		c.state = chromeKeys
	case want == '[':
		return notFormat(c.in.path, 0, 0, "not a %s: expected a JSON array of trace events, found %v", format, tokText(tok))
	default:
		return notFormat(c.in.path, 0, 0, "not a %s: expected a JSON object with traceEvents, found %v", format, tokText(tok))
	}
	return nil
}

// next decodes the next event into ev. It returns false at the end of the
// events, whether the input ended cleanly or not (c.end says).
func (c *chromeReader) next(ev *chromeEvent) bool {
	for {
		switch c.state {
		case chromeArray:
			if !c.dec.More() {
				if _, err := c.dec.Token(); err != nil { // the closing ']'
					c.endAt(err, true)
					return false
				}
				if c.onKey != nil && !c.bare {
					c.state = chromeKeys
					continue
				}
				c.state, c.closed = chromeDone, true
				return false
			}
			ev.reset()
			err := c.dec.Decode(ev)
			var te *json.UnmarshalTypeError
			switch {
			case err == nil:
				c.events++
				c.in.found()
				return true
			case errors.As(err, &te):
				// The value was read whole; only its type was wrong.
				c.typeErrs++
				continue
			default:
				c.endAt(err, false)
				return false
			}
		case chromeKeys:
			tok, err := c.dec.Token()
			if err != nil {
				c.endAt(err, true)
				return false
			}
			if d, ok := tok.(json.Delim); ok && d == '}' {
				c.state, c.closed = chromeDone, true
				return false
			}
			key, _ := tok.(string)
			if key == "traceEvents" {
				tok, err := c.dec.Token()
				if err != nil {
					c.endAt(err, false)
					return false
				}
				if d, ok := tok.(json.Delim); !ok || d != '[' {
					c.end = fmt.Sprintf("traceEvents at byte %d is %v, not an array", c.dec.InputOffset(), tokText(tok))
					c.state = chromeDone
					return false
				}
				c.sawEvents = true
				c.state = chromeArray
				continue
			}
			var skip json.RawMessage
			if c.onKey != nil {
				err = c.onKey(key, c.dec)
			} else {
				err = c.dec.Decode(&skip)
			}
			if err != nil {
				c.endAt(err, false)
				return false
			}
		default:
			return false
		}
	}
}

// maxTrailing is how much of what follows a trace's JSON is read to say
// what it is.
const maxTrailing = 64 << 20

// trailing reads what follows the trace's JSON once it was read whole,
// and describes it: "" when nothing but white space does. n counts the
// bytes (at least n when more than maxTrailing follow).
func (c *chromeReader) trailing() (n int64, what string) {
	if !c.closed {
		return 0, ""
	}
	at := c.dec.InputOffset()
	r := io.LimitReader(io.MultiReader(c.dec.Buffered(), c.in.r), maxTrailing)
	buf := make([]byte, 64<<10)
	var first byte
	var nuls, other int64
	for {
		k, err := r.Read(buf)
		for _, b := range buf[:k] {
			switch {
			case b == ' ' || b == '\t' || b == '\r' || b == '\n':
				continue
			case b == 0:
				nuls++
			default:
				other++
			}
			if first == 0 && b != 0 {
				first = b
			}
			n++
		}
		if err != nil {
			if err != io.EOF {
				return n, fmt.Sprintf("%s after the end of its JSON at byte %d", readErr(err), at)
			}
			break
		}
	}
	switch {
	case n == 0:
		return 0, ""
	case other == 0:
		what = fmt.Sprintf("%d NUL bytes after the end of its JSON at byte %d (padding left by the writer)", n, at)
	case first == '{' || first == '[':
		what = fmt.Sprintf("%d bytes after the end of its JSON at byte %d, starting with another JSON value (a second trace written after the first); only the first is imported", n, at)
	default:
		what = fmt.Sprintf("%d bytes after the end of its JSON at byte %d, starting with %s", n, at, quoteHead([]byte{first}))
	}
	if n >= maxTrailing {
		what = "at least " + what
	}
	return n, what
}

// endAt records how the input ended early: at a clean boundary (the file
// simply stops after a complete event: betweenValues), inside an event
// (cut), or at bytes that are not JSON (damaged).
func (c *chromeReader) endAt(err error, betweenValues bool) {
	c.state = chromeDone
	off := c.dec.InputOffset()
	var se *json.SyntaxError
	switch {
	case (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) && betweenValues) && c.tail.last == ',':
		// Nothing but white space after the comma that follows the last
		// complete value: the array was never closed, as older Horovod
		// versions leave theirs.
		c.unclosed = true
		c.end = fmt.Sprintf("the file ends after %d complete events without closing its JSON", c.events)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) && betweenValues:
		c.end = fmt.Sprintf("the file is cut after %d complete events, at byte %d: it ends without the comma or bracket that follows an event", c.events, off)
	case errors.Is(err, io.ErrUnexpectedEOF):
		c.end = fmt.Sprintf("the file is cut inside an event at byte %d, after %d complete events", off, c.events)
	case errors.As(err, &se):
		c.end = fmt.Sprintf("the JSON is damaged at byte %d (%v), after %d complete events", se.Offset, err, c.events)
	default:
		c.end = fmt.Sprintf("%s at byte %d, after %d complete events", readErr(err), off, c.events)
	}
}

// tokText describes a JSON token for an error.
func tokText(tok json.Token) string {
	switch t := tok.(type) {
	case json.Delim:
		return fmt.Sprintf("'%c'", rune(t))
	case string:
		if len(t) > 30 {
			t = t[:30] + "..."
		}
		return strconv.Quote(t)
	case nil:
		return "null"
	}
	return fmt.Sprint(tok)
}

func jsonErrText(err error) string {
	if errors.Is(err, io.EOF) {
		return "found nothing"
	}
	return "found " + err.Error()
}

// micros parses a Chrome trace time (µs, possibly fractional: Kineto writes
// ns as three decimals) into ns, exactly for decimals. ok is false for a
// missing or malformed number.
func micros(n json.Number) (int64, bool) {
	s := string(n)
	if s == "" {
		return 0, false
	}
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	if strings.ContainsAny(s, "eE") {
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil || f > 9e15 || f < -9e15 {
			return 0, false
		}
		return int64(f * 1000), true
	}
	whole, frac, _ := strings.Cut(s, ".")
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > 9e15 {
		return 0, false
	}
	ns := w * 1000
	if frac != "" {
		for len(frac) < 3 {
			frac += "0"
		}
		f, err := strconv.ParseInt(frac[:3], 10, 64)
		if err != nil {
			return 0, false
		}
		ns += f
	}
	if neg {
		ns = -ns
	}
	return ns, true
}

// idText returns a pid or tid (a number or a string) as text.
func idText(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
	}
	return string(raw)
}

// idInt returns a numeric pid or tid; ok is false for strings.
func idInt(raw json.RawMessage) (int64, bool) {
	n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	return n, err == nil
}
