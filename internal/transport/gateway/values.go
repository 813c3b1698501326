package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// errTooLarge marks a JSON value over the size limit; the error handler
// turns it into RESOURCE_EXHAUSTED and HTTP 413.
var errTooLarge = errors.New("too large")

// valueReader splits a request body into its top-level JSON objects: the
// messages of a newline-delimited JSON stream, or the one (possibly
// pretty-printed) object of a unary call. It finds where an object ends by
// tracking nesting and strings only; whether the object is valid JSON is
// for protojson to say. Each object is bounded by max bytes, so a client
// cannot make the server buffer more than one message's worth, and a body
// of any length streams through in constant memory.
//
// It is not safe for concurrent use. The slice next returns is valid until
// the following call.
type valueReader struct {
	r   *bufio.Reader
	max int
	buf []byte
	off int64 // bytes consumed, for error positions
}

func newValueReader(r io.Reader, max int) *valueReader {
	return &valueReader{r: bufio.NewReaderSize(r, 32<<10), max: max}
}

// next returns the next object, io.EOF at a clean end of the body (only
// whitespace left), or an error naming what is wrong and where.
func (v *valueReader) next() ([]byte, error) {
	for {
		c, err := v.r.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, fmt.Errorf("read body: %w", err)
		}
		v.off++
		if isSpace(c) {
			continue
		}
		if c != '{' {
			return nil, fmt.Errorf("byte %d: want a JSON object ('{'), found %q", v.off-1, c)
		}
		break
	}
	start := v.off - 1
	v.buf = append(v.buf[:0], '{')
	depth, inString, escaped := 1, false, false
	for depth > 0 {
		// Scan what is buffered in place rather than byte by byte.
		// Peek(1) fills the buffer when it is empty; the scan then covers
		// all that is buffered.
		if _, err := v.r.Peek(1); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("byte %d: body ends inside the JSON object that starts at byte %d", v.off, start)
			}
			return nil, fmt.Errorf("read body: %w", err)
		}
		chunk, _ := v.r.Peek(v.r.Buffered())
		n := 0
		for n < len(chunk) && depth > 0 {
			c := chunk[n]
			n++
			switch {
			case escaped:
				escaped = false
			case inString:
				switch c {
				case '\\':
					escaped = true
				case '"':
					inString = false
				}
			case c == '"':
				inString = true
			case c == '{' || c == '[':
				depth++
			case c == '}' || c == ']':
				// Mismatched brackets are protojson's to report; only
				// the count matters for finding the end.
				depth--
			}
		}
		if len(v.buf)+n > v.max {
			return nil, fmt.Errorf("JSON object at byte %d is larger than the limit of %d bytes: %w", start, v.max, errTooLarge)
		}
		v.buf = append(v.buf, chunk[:n]...)
		_, _ = v.r.Discard(n)
		v.off += int64(n)
	}
	return v.buf, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
