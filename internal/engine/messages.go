package engine

import "strconv"

// How numbers and names appear in the engine's messages: its errors and
// its log lines.

func itoa(n int) string { return strconv.Itoa(n) }

// quote quotes a name (a type URL, a type or index name) for a message,
// cut to 200 bytes: a client's bad input stays readable in an error.
func quote(s string) string {
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strconv.Quote(s)
}
