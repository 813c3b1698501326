package textfilter

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// SyntaxError describes why Parse rejected its input, and where.
type SyntaxError struct {
	Input  string // the text given to Parse
	Offset int    // byte offset of the error in Input
	Column int    // 1-based column, in runes, within the line holding Offset
	Msg    string // what is wrong, without the position
}

func newSyntaxError(src string, off int, msg string) *SyntaxError {
	return &SyntaxError{Input: src, Offset: off, Column: column(src, off), Msg: msg}
}

// Error returns the message prefixed with its column, such as
// `column 12: expected value after ">=", found ")"`. When the input has
// several lines the line number comes first: "line 2, column 5: ...".
func (e *SyntaxError) Error() string {
	if strings.Contains(e.Input, "\n") {
		off := clampOffset(e.Input, e.Offset)
		line := strings.Count(e.Input[:off], "\n") + 1
		return fmt.Sprintf("line %d, column %d: %s", line, e.Column, e.Msg)
	}
	return fmt.Sprintf("column %d: %s", e.Column, e.Msg)
}

// Pretty returns three lines: the input line holding the error, a line with
// a caret under the error's column, and the message. For example:
//
//	age >= )
//	       ^
//	expected value after ">=", found ")"
//
// Control characters and invalid UTF-8 in the echoed line are shown as
// U+FFFD; tabs are kept, and copied into the caret line so the caret lines up.
func (e *SyntaxError) Pretty() string {
	off := clampOffset(e.Input, e.Offset)
	start := strings.LastIndexByte(e.Input[:off], '\n') + 1
	end := strings.IndexByte(e.Input[off:], '\n')
	if end < 0 {
		end = len(e.Input)
	} else {
		end += off
	}
	line := strings.Map(func(r rune) rune {
		if r != '\t' && unicode.IsControl(r) {
			return utf8.RuneError
		}
		return r
	}, strings.ToValidUTF8(e.Input[start:end], string(utf8.RuneError)))

	var b strings.Builder
	b.WriteString(line)
	b.WriteByte('\n')
	n := 1
	for _, r := range line {
		if n >= e.Column {
			break
		}
		if r == '\t' {
			b.WriteByte('\t')
		} else {
			b.WriteByte(' ')
		}
		n++
	}
	for ; n < e.Column; n++ {
		b.WriteByte(' ')
	}
	b.WriteString("^\n")
	b.WriteString(e.Msg)
	return b.String()
}

// column returns the 1-based rune column of byte offset off within its line.
func column(src string, off int) int {
	off = clampOffset(src, off)
	start := strings.LastIndexByte(src[:off], '\n') + 1
	return utf8.RuneCountInString(src[start:off]) + 1
}

func clampOffset(s string, off int) int {
	return max(0, min(off, len(s)))
}
