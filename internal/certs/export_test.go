package certs

import "time"

// SetClock makes r read the time from now, so that a test can move past a
// certificate's validity without waiting for it.
func SetClock(r *Reloader, now func() time.Time) { r.now = now }
