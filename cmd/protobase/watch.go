package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/client/where"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/exitstatus"
)

// watchFlags are the flags of protobase watch.
type watchFlags struct {
	types    []string
	where    string
	from     string
	old      bool
	progress bool
}

func (a *app) watchCommand() *cobra.Command {
	var o watchFlags
	cmd := &cobra.Command{
		Use:   "watch --type FULL.NAME [--type ...] [--where EXPR] [--from now|oldest|POSITION] [--old]",
		Short: "Print the changes to records as they are committed",
		Long: `watch streams the committed changes to records of the given types (the Watch
call) and prints one JSON object per change, in commit order, until
interrupted (Ctrl-C exits 0 once what was received is printed):

  {"op": "CHANGE_OP_INSERT"|"CHANGE_OP_UPDATE"|"CHANGE_OP_REMOVE",
   "type": "shop.User", "key": {...}, "position": "C.I", "record": {...},
   "old": {...}}

op is the protobuf name of the change's operation: JSON written by the CLI,
REST and NATS names every enum value by its protobuf name.

key holds the primary-key fields; record is the record after the change
(absent for a remove); old, with --old, the record before an update or a
remove. A change is printed when its record (for a remove, the record before
it) matches --where; the filter syntax is that of "protobase search --help".

--from says where to start: now (the default: changes committed from now on),
oldest (the oldest change the server keeps), or a POSITION to start after:
C.I, a change's position as printed, or C, a commit, as the position of a
write acknowledgement (after every change of commit C). To resume without a
gap or a duplicate, pass the position of the last line printed (with
--progress, of the last progress line, which also covers the changes the
filter dropped). A position older than the changes the server keeps fails
with OutOfRange, naming the oldest one available.

A watch outlives a lost connection or a server restart: it starts again
after the last change printed (or the last progress mark), waiting 100 ms,
then twice as long after each failed try up to 5 s, and goes on without a
gap or a duplicate. Other errors end it (exit 1): OutOfRange when the
position it resumes from is no longer kept, a permission refused, a type
dropped.`,
		Example: `  protobase watch --type shop.User
  protobase watch -t shop.User -t shop.Order --where 'total > 100' --old
  protobase watch -t shop.User --from 1041.7 --progress >> changes.jsonl`,
		Args: cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringArrayVarP(&o.types, "type", "t", nil, "record type to watch, as a full name (required; repeat for several)")
	f.StringVarP(&o.where, "where", "w", "", `filter, e.g. 'age >= 30 and name prefix "An"'`)
	f.StringVar(&o.from, "from", "now", "where to start: now, oldest, or a position C or C.I to start after")
	f.BoolVar(&o.old, "old", false, `also print each update's and remove's record before the change ("old")`)
	f.BoolVar(&o.progress, "progress", false, `also print the server's progress marks, {"progress": "C.I"}: every change up to there was considered`)
	_ = cmd.MarkFlagRequired("type")
	cmd.RunE = exitstatus.RunE(func(cmd *cobra.Command, _ []string) error {
		return a.watch(cmd.Context(), &o)
	})
	return cmd
}

// request checks the flags that need no server and builds the request.
func (o *watchFlags) request() (*pb.WatchRequest, error) {
	req := &pb.WatchRequest{OldRecords: o.old}
	for _, t := range o.types {
		t = strings.TrimPrefix(strings.TrimSpace(t), typeURLPrefix)
		if t == "" {
			return nil, exitstatus.Usagef("--type: empty record type name")
		}
		if !slices.Contains(req.Types, t) {
			req.Types = append(req.Types, t)
		}
	}
	start, err := parseFrom(o.from)
	if err != nil {
		return nil, err
	}
	req.Start = start
	if o.where != "" {
		// Parsed here for the caret under a syntax error; the server
		// parses the text again with the same parser.
		if _, err := where.Parse(o.where); err != nil {
			var se *where.SyntaxError
			if errors.As(err, &se) {
				return nil, exitstatus.UsageError(fmt.Errorf("--where:\n%s", se.Pretty()))
			}
			return nil, exitstatus.UsageError(fmt.Errorf("--where: %w", err))
		}
		req.Filter = o.where
	}
	return req, nil
}

// parseFrom reads --from: now, oldest, or a position.
func parseFrom(s string) (*pb.WatchStart, error) {
	switch s {
	case "now":
		return client.StartNow(), nil
	case "oldest":
		return client.StartOldest(), nil
	}
	p, err := client.ParsePosition(s)
	if err != nil {
		return nil, exitstatus.Usagef("--from %q: want now, oldest, or a position C or C.I (%v)", s, err)
	}
	return client.StartAfter(p), nil
}

func (a *app) watch(ctx context.Context, o *watchFlags) error {
	req, err := o.request()
	if err != nil {
		return err
	}
	c, err := a.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	cp, err := loadChangePrinter(ctx, c, a.conn.Addr, req.Types)
	if err != nil {
		return err
	}
	// Ctrl-C (or SIGTERM) ends the watch, not the process: what was
	// received is printed and flushed, and the exit status is 0.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	w, err := c.Watch(ctx, client.WatchOptions{
		Types: req.Types, Filter: req.Filter, Start: req.Start, OldRecords: req.OldRecords,
		ProgressBatches: o.progress,
	})
	if err != nil {
		return watchError(a.conn.Addr, err)
	}
	defer w.Close()
	out := bufio.NewWriterSize(a.stdout, 64<<10)
	defer out.Flush()
	// The first message, which Watch received, names the start; then
	// each message's changes, and the point after them.
	for first := true; first || w.NextBatch(); first = false {
		for _, ch := range w.Batch() {
			if err := cp.print(out, ch); err != nil {
				return err
			}
		}
		if o.progress {
			fmt.Fprintf(out, "{\"progress\":%q}\n", client.FormatPosition(w.Position()))
		}
		// One flush per message: a reader of the output (a pipe, tail -f)
		// sees each change soon after the server sent it.
		if err := out.Flush(); err != nil {
			return fmt.Errorf("write output: %w", err)
		}
	}
	if ctx.Err() != nil {
		return nil
	}
	return watchError(a.conn.Addr, w.Err())
}

// watchError is callError for the stream's status, with the way out of an
// OUT_OF_RANGE start.
func watchError(addr string, err error) error {
	code := status.Code(err)
	err = callError("watch", addr, err)
	if code == codes.OutOfRange {
		return fmt.Errorf("%w\n(start --from now, --from oldest, or after a position the message names)", err)
	}
	return err
}

// changePrinter writes changes as JSON lines, records rendered with the
// descriptors of the server's schema as get and query render them.
type changePrinter struct {
	types map[string]*watchedType
	// reload fetches the schema again: a record with fields the
	// descriptors do not know was written after a schema change.
	reload func() (map[string]*watchedType, error)
}

// watchedType is one watched record type: its records' printer and its
// primary-key fields (a key is printed with them all, zeros included).
type watchedType struct {
	rec *printer
	pk  []string // JSON names of the top-level fields of the primary key
}

// loadChangePrinter fetches the server's schema and finds every watched
// type in it, as the other read commands find theirs.
func loadChangePrinter(ctx context.Context, c *client.Client, addr string, names []string) (*changePrinter, error) {
	load := func() (map[string]*watchedType, error) {
		resp, err := c.GetSchema(ctx)
		if err != nil {
			return nil, callError("get the schema", addr, err)
		}
		types := map[string]*watchedType{}
		for _, name := range names {
			rt, err := loadRecordType(ctx, c, addr, name)
			if err != nil {
				return nil, err
			}
			wt := &watchedType{rec: newPrinter(nil, "jsonl", rt.md, false)}
			for _, t := range resp.GetTypes() {
				if t.GetName() != name {
					continue
				}
				for _, path := range t.GetPrimaryKey() {
					top, _, _ := strings.Cut(path, ".")
					if fd := rt.md.Fields().ByName(protoreflect.Name(top)); fd != nil && !slices.Contains(wt.pk, fd.JSONName()) {
						wt.pk = append(wt.pk, fd.JSONName())
					}
				}
			}
			types[name] = wt
		}
		return types, nil
	}
	types, err := load()
	if err != nil {
		return nil, err
	}
	return &changePrinter{types: types, reload: load}, nil
}

// print writes one change as a JSON line. A record holding fields the
// printer's schema lacks makes it fetch the schema once more first.
func (cp *changePrinter) print(w io.Writer, ch *pb.Change) error {
	line, stale, err := cp.line(ch)
	if err == nil && stale {
		types, rerr := cp.reload()
		if rerr != nil {
			return rerr
		}
		cp.types = types
		line, _, err = cp.line(ch)
	}
	if err != nil {
		return fmt.Errorf("change at %s: %w", client.FormatPosition(ch.GetPosition()), err)
	}
	_, err = io.WriteString(w, line)
	return err
}

// line renders one change; stale reports a record with unknown fields.
func (cp *changePrinter) line(ch *pb.Change) (line string, stale bool, err error) {
	wt := cp.types[ch.GetType()]
	if wt == nil {
		known := make([]string, 0, len(cp.types))
		for k := range cp.types {
			known = append(known, k)
		}
		sort.Strings(known)
		return "", false, fmt.Errorf("the server sent a change of %q, which is not watched (%s)", ch.GetType(), strings.Join(known, ", "))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"op":%q,"type":%q`, ch.GetOp().String(), ch.GetType())
	key, err := wt.key(ch.GetKey())
	if err != nil {
		return "", false, fmt.Errorf("key: %w", err)
	}
	fmt.Fprintf(&b, `,"key":%s,"position":%q`, key, client.FormatPosition(ch.GetPosition()))
	if ch.GetExpired() {
		b.WriteString(`,"expired":true`)
	}
	for _, r := range []struct {
		name string
		rec  *anypb.Any
	}{{"record", ch.GetRecord()}, {"old", ch.GetOldRecord()}} {
		if r.rec == nil {
			continue
		}
		m, err := wt.rec.decode(r.rec)
		if err != nil {
			return "", false, fmt.Errorf("%s: %w", r.name, err)
		}
		stale = stale || len(m.GetUnknown()) > 0
		js, err := stableJSON(wt.rec.json, m, "")
		if err != nil {
			return "", false, fmt.Errorf("%s: %w", r.name, err)
		}
		fmt.Fprintf(&b, `,%q:%s`, r.name, js)
	}
	b.WriteString("}\n")
	return b.String(), stale, nil
}

// key renders a change's key: the primary-key fields of its record, each
// present even when zero (a record's JSON leaves zeros out, and a key of 0
// is a key all the same).
func (wt *watchedType) key(a *anypb.Any) ([]byte, error) {
	m, err := wt.rec.decode(a)
	if err != nil {
		return nil, err
	}
	all, err := stableJSON(protojson.MarshalOptions{EmitUnpopulated: true}, m, "")
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(all, &fields); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, name := range wt.pk {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:", name)
		b.Write(fields[name])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
