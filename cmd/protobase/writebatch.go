package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/internal/exitstatus"
)

// opNames are the operations a line of write names: by the word of the
// command that writes them, or by the protobuf name of the write
// operation, as REST and NATS requests name it.
var opNames = map[string]client.Op{
	"insert": client.Insert, "update": client.Update, "upsert": client.Upsert,
	"remove": client.Remove, "patch": client.Patch,
	"WRITE_OP_INSERT": client.Insert, "WRITE_OP_UPDATE": client.Update, "WRITE_OP_UPSERT": client.Upsert,
	"WRITE_OP_REMOVE": client.Remove, "WRITE_OP_PATCH": client.Patch,
}

func (a *app) writeBatchCommand() *cobra.Command {
	var o writeOptions
	var ifVersion uint64
	cmd := &cobra.Command{
		Use:   "write [--type FULL.NAME] [--condition JSON]... [--fields F,...] [--add F,...] [FILE|-]",
		Short: "Apply records of several operations and types as one atomic batch",
		Long: `write applies the records of its input, each with its own operation and of
any record type, as one batch: all of them or, when one fails (or a
condition does not hold), none. It is how a set of changes commits
together, such as a transfer's two updates and its record. Each line of
FILE (stdin when FILE is "-" or absent) is

  {"op": "insert"|"update"|"upsert"|"remove"|"patch", "type": "shop.User", "record": {...}}

(or by the protobuf names WRITE_OP_INSERT ... WRITE_OP_PATCH), where
"type" may be left out when --type names it, and the record is the
protobuf JSON of the type, as the other write commands read it. Each
record follows its operation's rules (insert AlreadyExists, update, remove
and patch NotFound); the patched records set the fields of --fields and
add to those of --add (see "protobase patch --help"). Blank lines are
skipped. The input is one batch: at most the server's records per batch
and message size.` + conditionsHelp,
		Example: `  protobase write --condition '{"record": 0, "version": "7"}' transfer.jsonl
  printf '%s\n' '{"op": "patch", "type": "bank.Account", "record": {"id": 1, "balance": "-5"}}' \
                '{"op": "patch", "type": "bank.Account", "record": {"id": 2, "balance": "5"}}' \
                '{"op": "insert", "type": "bank.Transfer", "record": {"id": 77, "from": 1, "to": 2, "amount": 5}}' |
    protobase write --add balance`,
		Args: cobra.MaximumNArgs(1),
	}
	cmd.RunE = exitstatus.RunE(func(cmd *cobra.Command, args []string) error {
		path := "-"
		if len(args) == 1 {
			path = args[0]
		}
		if cmd.Flags().Changed("if-version") {
			o.ifVersion = &ifVersion
		}
		return a.writeBatch(cmd.Context(), o, path)
	})
	f := cmd.Flags()
	f.StringVarP(&o.typeName, "type", "t", "", "record type of the lines that name none, as a full name")
	f.Uint64Var(&ifVersion, "if-version", 0, "apply only if the stored record of the input's one record is at this version (0: absent)")
	f.StringArrayVar(&o.conditions, "condition", nil, "a condition the batch needs, as protobuf JSON of protobase.v1.Condition (repeatable)")
	f.StringSliceVar(&o.fields, "fields", nil, "fields each patched record sets (comma-separated or repeated)")
	f.StringSliceVar(&o.add, "add", nil, "numeric fields each patched record adds to (comma-separated or repeated)")
	return cmd
}

// schemaTypes are the server's message types, for reading records of any
// record type and conditions naming any of them.
type schemaTypes struct {
	files     *protoregistry.Files
	records   map[string]bool
	unmarshal protojson.UnmarshalOptions
	limits    client.Limits
}

// loadSchemaTypes fetches the server's schema and builds its types.
func loadSchemaTypes(ctx context.Context, c *client.Client, addr string) (*schemaTypes, error) {
	resp, err := c.GetSchema(ctx)
	if err != nil {
		return nil, callError("get the schema", addr, err)
	}
	files, err := protodesc.NewFiles(resp.GetDescriptors())
	if err != nil {
		return nil, fmt.Errorf("the server's schema descriptors: %w", err)
	}
	st := &schemaTypes{files: files, records: map[string]bool{}, limits: client.LimitsOf(resp),
		unmarshal: protojson.UnmarshalOptions{Resolver: dynamicpb.NewTypes(files)}}
	for _, t := range resp.GetTypes() {
		st.records[t.GetName()] = true
	}
	return st, nil
}

// encode parses the protobuf JSON of a record of the record type name.
func (st *schemaTypes) encode(name string, js []byte) (*anypb.Any, error) {
	name = strings.TrimPrefix(name, typeURLPrefix)
	if !st.records[name] {
		return nil, fmt.Errorf("%q is not a record type of the server's schema", name)
	}
	d, err := st.files.FindDescriptorByName(protoreflect.FullName(name))
	md, ok := d.(protoreflect.MessageDescriptor)
	if err != nil || !ok {
		return nil, fmt.Errorf("record type %s is not a message of the server's schema descriptors", name)
	}
	m := dynamicpb.NewMessage(md)
	if err := st.unmarshal.Unmarshal(js, m); err != nil {
		return nil, fmt.Errorf("not a valid %s: %w", name, err)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &anypb.Any{TypeUrl: typeURLPrefix + name, Value: b}, nil
}

// writeLine is one line of write's input.
type writeLine struct {
	Op     string          `json:"op"`
	Type   string          `json:"type"`
	Record json.RawMessage `json:"record"`
}

// opsLine reads one line of write's input: its operation and record.
func (st *schemaTypes) opsLine(js []byte, defaultType string) (client.Op, *anypb.Any, error) {
	var l writeLine
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return 0, nil, fmt.Errorf(`not a line {"op": ..., "type": ..., "record": {...}}: %w`, err)
	}
	op, ok := opNames[l.Op]
	if !ok {
		return 0, nil, fmt.Errorf("op %q is not insert, update, upsert, remove or patch", l.Op)
	}
	if l.Type == "" {
		l.Type = defaultType
	}
	switch {
	case l.Type == "":
		return 0, nil, errors.New(`no "type" (and no --type)`)
	case len(l.Record) == 0:
		return 0, nil, errors.New(`no "record"`)
	}
	rec, err := st.encode(l.Type, l.Record)
	return op, rec, err
}

// writeBatch is write: the input's records, each with its operation, as
// one batch with the conditions.
func (a *app) writeBatch(ctx context.Context, o writeOptions, path string) error {
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
	st, err := loadSchemaTypes(ctx, c, a.conn.Addr)
	if err != nil {
		return err
	}
	conds, err := parseConditions(st.unmarshal, o)
	if err != nil {
		return err
	}
	var ops []client.Op
	recs, lines, err := readBatch(in, st.limits, func(_ uint64, js []byte) (proto.Message, error) {
		op, rec, err := st.opsLine(js, o.typeName)
		ops = append(ops, op)
		return rec, err
	})
	if err != nil {
		return err
	}
	if o.ifVersion != nil && len(recs) != 1 {
		return exitstatus.Usagef("--if-version applies to a write of one record; %s holds %d", in.name, len(recs))
	}
	b := client.Batch{Ops: ops, Records: recs, Fields: o.fields, Add: o.add}
	for _, c := range conds {
		b.Conditions = append(b.Conditions, c.cond)
	}
	spec := writeSpec{name: "write", done: "wrote"}
	pos, err := c.Apply(ctx, b)
	if err != nil {
		return writeFailure(spec, a.conn.Addr, in.name, err, lines, 0, nil, conds)
	}
	n := len(recs)
	fmt.Fprintf(a.stderr, "%s %d %s at position %d; %d %s held\n", spec.done, n, plural(n, "record", "records"),
		pos, len(conds), plural(len(conds), "condition", "conditions"))
	return nil
}
