package nats

import (
	"testing"

	"github.com/protobase/protobase/internal/auth"
)

func TestRepliesCheck(t *testing.T) {
	key, err := auth.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	other, err := auth.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	inbox, bearer := InboxPrefix(key), "Bearer "+key
	// The reasons under RepliesAnyInbox, RepliesSharedInbox and
	// RepliesKeyInbox (with the header bearer unless noted).
	for _, c := range []struct {
		reply, header   string
		any, shared, ok DropReason
	}{
		{inbox + ".a.b", bearer, dropNone, dropNone, dropNone},
		{inbox + ".a", bearer, dropNone, dropNone, dropNone},
		{inbox, bearer, dropNone, dropNone, DropOutsideInbox},
		{inbox + "x.a", bearer, dropNone, dropNone, DropOutsideInbox},
		{InboxPrefix(other) + ".a", bearer, dropNone, dropNone, DropOutsideInbox},
		{inbox + ".a", "Bearer " + other, dropNone, dropNone, DropOutsideInbox},
		{inbox + ".a", "", dropNone, dropNone, DropNoKey},
		{inbox + ".a", "Basic " + key, dropNone, dropNone, DropNoKey},
		{"_INBOX.x", bearer, dropNone, dropNone, DropOutsideInbox},
		{"_INBOX", bearer, dropNone, DropOutsideInbox, DropOutsideInbox},
		{"_INBOXES.x", bearer, dropNone, DropOutsideInbox, DropOutsideInbox},
		{"elsewhere.x", bearer, dropNone, DropOutsideInbox, DropOutsideInbox},
		{"_R_.abc.def", bearer, dropNone, DropOutsideInbox, DropOutsideInbox},
		{"protobasex.y", bearer, dropNone, DropOutsideInbox, DropOutsideInbox},
		{"", bearer, DropNoReply, DropNoReply, DropNoReply},
		{"protobase", bearer, DropReserved, DropReserved, DropReserved},
		{"protobase.insert", bearer, DropReserved, DropReserved, DropReserved},
		{"protobase.keys.create", "", DropReserved, DropReserved, DropReserved},
		{"$SRV.PING", bearer, DropReserved, DropReserved, DropReserved},
		{"$JS.API.STREAM.CREATE.x", bearer, DropReserved, DropReserved, DropReserved},
		{"$SYS.REQ.SERVER.PING", bearer, DropReserved, DropReserved, DropReserved},
		{"$KV.bucket.key", bearer, DropReserved, DropReserved, DropReserved},
	} {
		for rule, want := range map[Replies]DropReason{RepliesAnyInbox: c.any, RepliesSharedInbox: c.shared, RepliesKeyInbox: c.ok} {
			if got := rule.check(c.reply, c.header, "protobase"); got != want {
				t.Errorf("rule %d, reply %q, the key's header %v: %v, want %v", rule, c.reply, c.header == bearer, got, want)
			}
		}
	}
}

func TestPublishSubjects(t *testing.T) {
	for role, want := range map[auth.Role]int{auth.RoleNone: 0, auth.RoleRead: 4, auth.RoleWrite: 9, auth.RoleSchema: 10, auth.RoleAdmin: 13} {
		if got := PublishSubjects("p", role); len(got) != want {
			t.Errorf("%v: %q, want %d subjects", role, got, want)
		}
	}
}
