package nats

import (
	"strings"
	"sync/atomic"

	"github.com/nats-io/nats.go/micro"

	"github.com/protobase/protobase/internal/auth"
)

// Replies says which reply subjects the service answers to. NATS lets a
// publisher name any reply subject, and the service publishes its answer
// there with its own rights, which reach every subject: without a rule a
// caller could have a record delivered into another caller's inbox, or a
// reply published onto the API's own subjects. A request whose reply
// subject breaks the rule is dropped unanswered, since there is nowhere
// safe to answer it: it is counted in Stats, and logged at most once per
// lograte.Every.
//
// Under every rule a request without a reply subject is dropped (a
// request is something answered; a write published without one is not
// applied), and so is one whose reply subject is the API prefix or under
// it, or starts with "$" (the subjects NATS reserves: $SYS, $JS, $SRV,
// $KV, ...).
type Replies int

const (
	// RepliesAnyInbox is the rule for a NATS server Protobase did not
	// configure (Config.NATSURL): it cannot know which inbox prefix each
	// caller may subscribe to, so only the reserved subjects above are
	// refused. That a caller cannot have replies sent into another's
	// inbox rests on how the operator laid out accounts (docs/security.md,
	// "External server").
	RepliesAnyInbox Replies = iota
	// RepliesSharedInbox is the rule for the embedded server without
	// authentication: every caller may subscribe under "_INBOX." only, so
	// a reply subject elsewhere is no caller's inbox.
	RepliesSharedInbox
	// RepliesKeyInbox is the rule for the embedded server with
	// authentication: a reply subject must be under InboxPrefix(key) of
	// the key in the request's Authorization header, the only inbox the
	// holder of that key can subscribe to. A request without a
	// well-formed header has no inbox and is dropped.
	RepliesKeyInbox
)

// DropReason is why the service dropped a request without answering.
type DropReason int

// The reasons; DropReasons lists them for metrics.
const (
	dropNone DropReason = iota
	// DropNoReply: the request had no reply subject.
	DropNoReply
	// DropNoKey: with RepliesKeyInbox, the request had no well-formed
	// Authorization header, so no inbox to answer to.
	DropNoKey
	// DropOutsideInbox: the reply subject is not under the caller's
	// inbox prefix (its key's, or "_INBOX." without authentication).
	DropOutsideInbox
	// DropReserved: the reply subject is the API prefix, under it, or
	// starts with "$".
	DropReserved
	numDropReasons
)

// DropReasons are the reasons a request may be dropped for.
var DropReasons = []DropReason{DropNoReply, DropNoKey, DropOutsideInbox, DropReserved}

var dropReasonNames = [numDropReasons]string{"", "no_reply", "no_key", "outside_inbox", "reserved"}

// String is the reason's metric label.
func (r DropReason) String() string {
	if r > dropNone && r < numDropReasons {
		return dropReasonNames[r]
	}
	return "none"
}

// sharedInboxPrefix is nats.go's default inbox prefix, under which every
// caller of the embedded server without authentication may subscribe.
const sharedInboxPrefix = "_INBOX"

// check returns why a request with the reply subject reply and the
// Authorization header value header may not be answered under rule by a
// service under prefix, or dropNone.
func (rule Replies) check(reply, header, prefix string) DropReason {
	switch {
	case reply == "":
		return DropNoReply
	case strings.HasPrefix(reply, "$") || reply == prefix || under(reply, prefix):
		return DropReserved
	}
	switch rule {
	case RepliesSharedInbox:
		if !under(reply, sharedInboxPrefix) {
			return DropOutsideInbox
		}
	case RepliesKeyInbox:
		key, err := auth.ParseAuthorization(header)
		if err != nil {
			return DropNoKey
		}
		if !under(reply, InboxPrefix(key)) {
			return DropOutsideInbox
		}
	}
	return dropNone
}

// under reports whether subject is a subject below prefix (prefix and at
// least one more token).
func under(subject, prefix string) bool {
	return len(subject) > len(prefix)+1 && subject[len(prefix)] == '.' && strings.HasPrefix(subject, prefix)
}

// drop counts a request dropped for why, and logs it when the last line
// is older than lograte.Every, with the number dropped since: a caller
// can drop requests at will, and a line each would flood the log.
func (s *Service) drop(req micro.Request, why DropReason) {
	s.stats.dropped[why].Add(1)
	if n, ok := s.dropLog.Allow(); ok {
		s.log.Warn("nats: requests dropped unanswered: their reply subject is not the caller's inbox",
			"reason", why.String(), "subject", req.Subject(), "dropped", n)
	}
}

// Stats counts what the service dropped and how its connection fared; the
// server exports them as metrics. The zero value is ready. One Stats is
// shared by the service (Options.Stats) and its connection's options
// (ConnOptions).
type Stats struct {
	dropped     [numDropReasons]atomic.Uint64
	disconnects atomic.Uint64
	reconnects  atomic.Uint64
	overflows   atomic.Uint64
	rateRefused atomic.Uint64
	floods      atomic.Uint64
}

// RateRefused counts the requests refused because their key sent faster
// than Options.KeyBytesPerSecond.
func (st *Stats) RateRefused() uint64 { return st.rateRefused.Load() }

// Floods counts the times a key over its byte rate was reported
// (Options.OnFlood), at most once a second per key.
func (st *Stats) Floods() uint64 { return st.floods.Load() }

// Dropped is the number of requests dropped unanswered for why.
func (st *Stats) Dropped(why DropReason) uint64 {
	if why <= dropNone || why >= numDropReasons {
		return 0
	}
	return st.dropped[why].Load()
}

// Disconnects counts the service connection's losses.
func (st *Stats) Disconnects() uint64 { return st.disconnects.Load() }

// Reconnects counts the service connection's recoveries.
func (st *Stats) Reconnects() uint64 { return st.reconnects.Load() }

// PendingOverflows counts the times an endpoint's subscription reached
// its pending limits (PendingMsgs, PendingBytes) and NATS began dropping
// its requests.
func (st *Stats) PendingOverflows() uint64 { return st.overflows.Load() }
