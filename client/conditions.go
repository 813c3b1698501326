package client

import (
	"strconv"

	"google.golang.org/protobuf/proto"

	pb "github.com/protobase/protobase/gen/protobase/v1"
)

// Condition helpers build a Batch's Conditions: what must hold, in the
// state the batch starts from, for it to apply. A version is what reads
// return when asked for versions (GetVersioned, Query.versions); 0 stands
// for a record that does not exist. If a condition fails, nothing of the
// batch is applied and Apply's error is an *Error with code Aborted whose
// Write names the condition (Write.Condition), the record for a record
// condition (Write.Record) and the version found (Write.Version).
//
//	recs, vers, _ := c.GetVersioned(ctx, "shop.User", 7)
//	// ... change recs[0] ...
//	_, err := c.Apply(ctx, client.Batch{Op: client.Update, Records: []proto.Message{recs[0]},
//		Conditions: []*pb.Condition{client.IfVersion(0, vers[0])}})
//
// A filter is the text filter syntax of Query.filter (`age >= 30 and
// name prefix "An"`).

// IfVersion holds when the stored record with the primary key of the
// batch's record number record (0-based) is at version (0: there is none).
func IfVersion(record int, version uint64) *pb.Condition {
	return &pb.Condition{Target: recordTarget(record), Version: &version}
}

// IfMatches holds when the stored record with the primary key of the
// batch's record number record exists and matches filter.
func IfMatches(record int, filter string) *pb.Condition {
	return &pb.Condition{Target: recordTarget(record), Filter: filter}
}

// IfKey holds when the stored record with the primary key of key is at
// version (0: there is none). key is a record of the type, of which only
// the primary-key fields are read: a generated message or an *anypb.Any.
// A key that does not encode panics, as a programming error.
func IfKey(key proto.Message, version uint64) *pb.Condition {
	return &pb.Condition{Target: keyTarget(key), Version: &version}
}

// IfKeyMatches holds when the stored record with the primary key of key
// exists and matches filter.
func IfKeyMatches(key proto.Message, filter string) *pb.Condition {
	return &pb.Condition{Target: keyTarget(key), Filter: filter}
}

// IfQuery holds when q matches count records (up to its limit) and the
// highest version among them is maxVersion (0 when it matches none). It
// is what a read of q saw, for a batch that must not commit if any record
// q reads was written, added or removed since: on a server sharing an
// etcd store the batch fails on any write to q's type since (see
// docs/write.md).
func IfQuery(q *pb.Query, count, maxVersion uint64) *pb.Condition {
	return &pb.Condition{Target: &pb.Condition_Query{Query: q}, Count: &count, MaxVersion: &maxVersion}
}

// IfCount holds when q matches count records (up to its limit), whatever
// their versions.
func IfCount(q *pb.Query, count uint64) *pb.Condition {
	return &pb.Condition{Target: &pb.Condition_Query{Query: q}, Count: &count}
}

func recordTarget(record int) *pb.Condition_Record {
	if record < 0 || int64(record) > int64(^uint32(0)) {
		panic("client: condition on record " + strconv.Itoa(record) + ": not an index into a batch")
	}
	return &pb.Condition_Record{Record: uint32(record)}
}

func keyTarget(key proto.Message) *pb.Condition_Key {
	a, err := anyOf(key)
	if err != nil {
		panic("client: condition key does not encode: " + err.Error())
	}
	return &pb.Condition_Key{Key: a}
}
