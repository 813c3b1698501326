package engine

import "strconv"

func itoa(n int) string { return strconv.Itoa(n) }

func quote(s string) string {
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strconv.Quote(s)
}
