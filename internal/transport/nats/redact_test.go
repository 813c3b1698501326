package nats

import "testing"

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"nats://127.0.0.1:4222":        "nats://127.0.0.1:4222",
		"tls://user:secret@host:4222":  "tls://REDACTED@host:4222",
		"nats://s3cr3ttoken@host:4222": "nats://REDACTED@host:4222",
		"user:secret@host:4222":        "(NATS URL not shown)",
		"nats://a:1,nats://u:p@b:2":    "nats://a:1,nats://REDACTED@b:2",
	} {
		if got := RedactURL(raw); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
	}
}
