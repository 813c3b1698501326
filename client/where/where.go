// Package where is the Go client's entry to the text syntax of query
// filters (`age >= 30 and name prefix "An"`): it parses text into Expr
// messages and formats them back. The syntax and its one parser live in
// internal/textfilter, which the server uses for the filter field of a
// Query; this package is a thin public wrapper over it, so a filter parsed
// here means what the server would make of the same text.
//
// The syntax is documented in docs/clients.md; in short:
//
//	expr  := or ; or := and ("or" and)* ; and := unary ("and" unary)*
//	unary := "not" unary | "(" expr ")" | path op value
//	       | path "in" "(" value ("," value)* ")" | path "prefix" value
//	       | path "contains" value | path
//	op    := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="
//
// with values int (42, -0x10, 5u), float (1.5, 1e9, inf, nan), strings
// ("..." or '...'), bytes (b"..."), true, false and enum value names.
package where

import (
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/textfilter"
)

// SyntaxError describes why Parse rejected its input, and where (byte
// offset and 1-based column); Pretty renders the line with a caret.
type SyntaxError = textfilter.SyntaxError

// Parse parses a filter expression. The error, if any, is a *SyntaxError.
func Parse(s string) (*pb.Expr, error) { return textfilter.Parse(s) }

// Format renders e in the syntax Parse accepts, in a canonical form;
// Parse(Format(e)) equals e for every e Parse returns.
func Format(e *pb.Expr) string { return textfilter.Format(e) }
