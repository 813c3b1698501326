package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/internal/exitstatus"
)

// interactiveLinger is how long a partial batch waits for more records
// when stdin is a terminal.
const interactiveLinger = 10 * time.Millisecond

// writeSpec is what sets insert, update, upsert and remove apart.
type writeSpec struct {
	op   client.Op
	name string // "insert"
	done string // "inserted"
}

type writeOptions struct {
	typeName string
	batch    int
	batchSet bool // --batch was given; else it shrinks to the server's limit

	// conditions are the --condition flags (protobuf JSON); ifVersion is
	// --if-version when set.
	conditions []string
	ifVersion  *uint64
	// fields and add are patch's.
	fields, add []string
}

// jsonLinesHelp ends the long help of every write command.
const jsonLinesHelp = `

Records are read as JSON lines from FILE, or from stdin when FILE is "-" or
absent: one JSON object per line, in the protobuf JSON mapping of the
record type given with --type (field names as in the .proto file or in
lowerCamelCase; 64-bit integers may be strings). Blank lines are skipped.
The message types come from the server's schema, so nothing is compiled
locally.

Records are sent in batches of exactly --batch records (the last may hold
fewer) on one write stream; only where that many records would exceed the
server's message size limit is a batch cut short. When stdin is a terminal,
a partial batch is also sent 10 ms after its first record, so that typed
records go out as they are entered. --batch may not exceed the server's
limit of records per batch (serve --max-batch-records).

Each batch applies atomically, and batches apply in order. The first
failure stops everything: the batches before the failing one are applied
and durable, the failing batch and those after it are not. The error names
the batch, the record, its input line and the field to blame, and how many
records were applied before it. If the server vanishes instead, the error
says how many records it had acknowledged as durable; later ones may or
may not have been applied. A call the server refuses outright (a key
without the write role) applies nothing, and the error says so. A line
that is not valid JSON for the type, or a record too large for the
server's message limit, stops the command too: the records before it are
written, nothing after it is sent.

A progress bar is drawn on stderr when stderr is a terminal; a summary is
printed on stderr at the end. Exit status 0 means every record was written.` + conditionsHelp

func (a *app) writeCommand(spec writeSpec, cmd *cobra.Command) *cobra.Command {
	var o writeOptions
	cmd.Use = spec.name + " --type FULL.NAME [FILE|-]"
	if spec.op == client.Patch {
		cmd.Use = spec.name + " --type FULL.NAME (--fields F,... | --add F,...) [FILE|-]"
	}
	cmd.Long += jsonLinesHelp
	cmd.Args = cobra.MaximumNArgs(1)
	var ifVersion uint64
	cmd.RunE = exitstatus.RunE(func(cmd *cobra.Command, args []string) error {
		path := "-"
		if len(args) == 1 {
			path = args[0]
		}
		o.batchSet = cmd.Flags().Changed("batch")
		if cmd.Flags().Changed("if-version") {
			o.ifVersion = &ifVersion
		}
		return a.write(cmd.Context(), spec, o, path)
	})
	f := cmd.Flags()
	f.StringVarP(&o.typeName, "type", "t", "", "full name of the record type, e.g. shop.User (required)")
	_ = cmd.MarkFlagRequired("type")
	f.IntVar(&o.batch, "batch", 1000, "records per write batch; when not given, at most the server's limit")
	f.Uint64Var(&ifVersion, "if-version", 0, "write the input's one record only if the stored record is at this version (0: absent)")
	f.StringArrayVar(&o.conditions, "condition", nil, "a condition the write's one batch needs, as protobuf JSON of protobase.v1.Condition (repeatable)")
	if spec.op == client.Patch {
		f.StringSliceVar(&o.fields, "fields", nil, "fields each record sets, dotted through message fields (comma-separated or repeated)")
		f.StringSliceVar(&o.add, "add", nil, "numeric fields whose values are added to the stored ones (comma-separated or repeated)")
	}
	return cmd
}

func (a *app) write(ctx context.Context, spec writeSpec, o writeOptions, path string) error {
	if o.batch <= 0 {
		return exitstatus.Usagef("--batch must be positive")
	}
	if spec.op == client.Patch && len(o.fields) == 0 && len(o.add) == 0 {
		return exitstatus.Usagef("patch needs the fields it sets (--fields) or adds to (--add)")
	}
	in, err := openInput(path, a.stdin)
	if err != nil {
		return err
	}
	defer in.Close()
	c, err := a.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	rt, err := loadRecordType(ctx, c, a.conn.Addr, o.typeName)
	if err != nil {
		return err
	}
	if o.ifVersion != nil || len(o.conditions) > 0 {
		conds, err := parseConditions(rt.unmarshal, o)
		if err != nil {
			return err
		}
		return a.writeOnce(ctx, c, spec, o, rt, in, conds)
	}
	if max := rt.limits.MaxBatchRecords; o.batch > max && !o.batchSet {
		o.batch = max
	} else if o.batch > max {
		return exitstatus.Usagef("--batch %d is over the server's limit of %d records per batch (serve --max-batch-records)", o.batch, max)
	}
	wopts := client.WriterOptions{BatchRecords: o.batch, Limits: rt.limits, Fields: o.fields, Add: o.add}
	if in.file == nil && isTerminalReader(a.stdin) {
		wopts.Linger = interactiveLinger
	}
	w, err := c.NewWriter(ctx, spec.op, wopts)
	if err != nil {
		return callError(spec.name, a.conn.Addr, err)
	}

	var prog *progress
	if a.isTerminal(a.stderr) {
		prog = newProgress(a.stderr, spec.name, in.size, false)
	}
	start := time.Now()
	feed := writeFeed{in: in, rt: rt, prog: prog}
	feed.run(w)
	lines, lineNo, readErr, parseErr := &feed.lines, feed.lineNo, feed.readErr, feed.parseErr
	// Close sends what is pending (the records before a bad line too) and
	// waits until the server has made everything durable.
	ack, err := w.Close()
	elapsed := time.Since(start)
	prog.finish(err == nil && readErr == nil && parseErr == nil)
	if err != nil {
		return writeFailure(spec, a.conn.Addr, in.name, err, lines, w.Durable(), parseErr, nil)
	}
	n := ack.GetRecords()
	switch {
	case readErr != nil:
		return fmt.Errorf("%w\n%d %s read before the error %s written; the rest of the input was not read",
			readErr, n, plural(n, "record", "records"), plural(n, "was", "were"))
	case parseErr != nil:
		return fmt.Errorf("%w\n%d %s before line %d %s written; nothing after it was sent",
			parseErr, n, plural(n, "record", "records"), lineNo, plural(n, "was", "were"))
	}
	secs := elapsed.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(n) / secs
	}
	fmt.Fprintf(a.stderr, "%s %d %s in %.2fs (%.0f records/s)\n", spec.done, n, plural(n, "record", "records"), secs, rate)
	return nil
}

// writeFeed reads an input's lines into a writer, one record a line.
type writeFeed struct {
	in   *input
	rt   *recordType
	prog *progress

	lines    lineMap // the input line of each record sent
	lineNo   uint64  // the last line read
	readErr  error   // reading the input failed
	parseErr error   // a line is not a record, or over a limit
}

// run writes the input's records to w until the input ends, a line is not
// a record, or w fails (its Close then says why).
func (f *writeFeed) run(w *client.Writer) {
	lr := newLineReader(f.in.r)
	for {
		raw, err := lr.next()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				f.readErr = fmt.Errorf("read %s: %w", f.in.name, err)
			}
			return
		}
		f.lineNo++
		f.prog.read(len(raw))
		js := bytes.TrimSpace(raw)
		if len(js) == 0 {
			continue
		}
		rec, err := f.rt.encode(js)
		if err != nil {
			f.parseErr = fmt.Errorf("%s line %d: not a valid %s: %w", f.in.name, f.lineNo, f.rt.name, err)
			return
		}
		f.prog.record()
		f.lines.add(f.lineNo)
		if err := w.WriteAny(rec); err != nil {
			var le *client.LimitError
			if errors.As(err, &le) {
				// Refused before sending; the writer goes on.
				f.parseErr = fmt.Errorf("%s line %d: %w", f.in.name, f.lineNo, err)
			}
			// Otherwise the stream failed; Close returns the same error.
			return
		}
	}
}

// writeFailure describes a failed write stream: the server's status, the
// details of the WriteError (with the input line of the failing record) and
// how much was applied before it, or, without details (the server
// vanished), how many records it had acknowledged as durable. parseErr,
// when set, is a bad line found after the failing record; conds are the
// write's conditions, for a condition that failed.
func writeFailure(spec writeSpec, addr, input string, err error, lines *lineMap, durable uint64, parseErr error, conds []condition) error {
	var b strings.Builder
	var ce *client.Error
	switch {
	case !errors.As(err, &ce):
		fmt.Fprintf(&b, "%s failed: %v", spec.name, err)
	case ce.Status.Code() == codes.Unavailable && ce.Write == nil:
		fmt.Fprintf(&b, "%s: the server at %s is unavailable: %s", spec.name, addr, ce.Status.Message())
	default:
		fmt.Fprintf(&b, "%s failed (%s): %s", spec.name, ce.Status.Code(), ce.Status.Message())
	}
	switch {
	case ce != nil && ce.Write == nil && refusedAtOpen(ce.Status.Code()):
		b.WriteString("\n  applied: nothing; the server refused the call before it read a record")
	case ce == nil || ce.Write == nil:
		fmt.Fprintf(&b, "\n  durable: %d %s acknowledged by the server", durable, plural(durable, "record", "records"))
		if line, ok := lines.line(durable); ok {
			fmt.Fprintf(&b, "; the input from %s line %d on may or may not have been applied", input, line)
		}
	}
	if ce != nil && ce.Write != nil {
		writeErrorDetails(&b, ce, input, lines, conds)
	}
	if parseErr != nil {
		fmt.Fprintf(&b, "\nalso: %v", parseErr)
	}
	return errors.New(b.String())
}

// refusedAtOpen says a write stream's status without WriteError details
// is the server's refusal of the call itself (a key without the role, a
// bad key): the server ends a stream it has read from with details, so
// such a status means nothing was applied. Statuses a lost connection or
// the client itself produces (Unavailable, DeadlineExceeded, Canceled,
// Internal, ResourceExhausted for a message the client would not send)
// stay ambiguous.
func refusedAtOpen(c codes.Code) bool {
	switch c {
	case codes.Unauthenticated, codes.PermissionDenied, codes.Unimplemented,
		codes.InvalidArgument, codes.FailedPrecondition, codes.NotFound, codes.AlreadyExists:
		return true
	}
	return false
}

// writeErrorDetails describes a WriteError: the record (its input line)
// or the condition that failed, the field, and what was applied before.
func writeErrorDetails(b *strings.Builder, ce *client.Error, input string, lines *lineMap, conds []condition) {
	we := ce.Write
	ord := we.GetRecordsApplied() + we.GetRecord()
	// Errors of a whole batch (its size) carry no type URL, and a failed
	// condition on a key or a query names no record: their record index
	// names no input record.
	names := we.GetTypeUrl() != ""
	if we.Condition != nil {
		i := int(we.GetCondition())
		names = i < len(conds) && conds[i].onRecord()
		fmt.Fprintf(b, "\n  condition: %d", i)
		if i < len(conds) {
			fmt.Fprintf(b, " (%s)", conds[i].flag)
		}
		fmt.Fprintf(b, ", found version %d", we.GetVersion())
	}
	if line, ok := lines.line(ord); ok && names {
		fmt.Fprintf(b, "\n  input:   %s line %d", input, line)
	}
	if we.Condition == nil {
		fmt.Fprintf(b, "\n  batch:   %d (record %d of the batch)", we.GetBatch(), we.GetRecord())
	}
	if t := we.GetTypeUrl(); t != "" {
		fmt.Fprintf(b, "\n  type:    %s", strings.TrimPrefix(t, typeURLPrefix))
	}
	if f := we.GetField(); f != "" {
		fmt.Fprintf(b, "\n  field:   %s", f)
	}
	if r := we.GetReason(); r != "" {
		fmt.Fprintf(b, "\n  reason:  %s", r)
	}
	n, nb := we.GetRecordsApplied(), we.GetBatchesApplied()
	fate := "the failing batch and all after it were not applied"
	if ce.Status.Code() == codes.DeadlineExceeded {
		fate = "the failing batch may have been applied (read it back before retrying); those after it were not"
	}
	fmt.Fprintf(b, "\n  applied: %d %s (%d %s), durable; %s",
		n, plural(n, "record", "records"), nb, plural(nb, "batch", "batches"), fate)
	if line, ok := lines.line(n); ok {
		fmt.Fprintf(b, " (input from line %d on)", line)
	}
}
