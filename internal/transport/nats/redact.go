package nats

import (
	"net/url"
	"strings"
)

// RedactURL is a NATS server URL (or a comma-separated list of them, as
// nats.Connect takes) fit to print or log: each user part (a user and
// password, or a token) is replaced, and a URL that does not parse is not
// shown at all, since it may hold credentials in a form url.Parse does not
// know.
func RedactURL(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.Host == "" {
			return "(NATS URL not shown)"
		}
		if u.User != nil {
			u.User = url.User("REDACTED")
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}
