package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/structpb"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/exitstatus"
)

func (a *app) getCommand() *cobra.Command {
	var typ, format string
	var versions bool
	cmd := &cobra.Command{
		Use:   "get --type FULL.NAME [--versions] KEY...",
		Short: "Read records by primary key",
		Long: `get reads the records with the given primary keys (the Get call, on one
snapshot) and prints them in the order of the keys, one JSON object per line
(or a table). Each KEY is JSON: a number or "string" for a one-field key, a
list in primary_key order ([1, "a"]) or an object by field ({"user": 1, "id":
2}) for a compound key; a KEY that is not JSON is taken as a string (ann).
Numbers keep every digit (they travel as text), and strings of digits fit
integer fields. A key with no record is named on stderr, and then get exits
with status 1. --versions prints each record's version beside it,
{"version": "N", "record": {...}} (in a table, a first column): the number
that --if-version of the write commands compares.`,
		Example: `  protobase get --type shop.User 1 2 3
  protobase get -t shop.Order '[7, 1001]' '{"user_id": 7, "id": 1002}'
  protobase get -t shop.Tag ann bob
  protobase get -t shop.User --versions 1`,
		Args: cobra.MinimumNArgs(1),
	}
	f := cmd.Flags()
	f.StringVarP(&typ, "type", "t", "", "record type of the keys, as a full name (required)")
	f.StringVar(&format, "format", "jsonl", "output format: jsonl or table")
	f.BoolVar(&versions, "versions", false, `print each record's version: {"version": "N", "record": {...}} (table: a first column)`)
	_ = cmd.MarkFlagRequired("type")
	cmd.RunE = exitstatus.RunE(func(cmd *cobra.Command, args []string) error {
		return a.get(cmd.Context(), typ, format, versions, args)
	})
	return cmd
}

func (a *app) get(ctx context.Context, typ, format string, versions bool, args []string) error {
	if format != "jsonl" && format != "table" {
		return exitstatus.Usagef("--format %q: want jsonl or table", format)
	}
	req := &pb.GetRequest{Keys: make([]*structpb.Value, len(args)), Versions: versions}
	for i, arg := range args {
		v, err := keyArg(arg)
		if err != nil {
			return exitstatus.Usagef("key %d (%s): %v", i+1, arg, err)
		}
		req.Keys[i] = v
	}
	c, err := a.dial()
	if err != nil {
		return err
	}
	defer c.Close()
	rt, err := loadRecordType(ctx, c, a.conn.Addr, typ)
	if err != nil {
		return err
	}
	req.Type = rt.name
	resp, err := c.API().Get(ctx, req)
	if err != nil {
		return callError("get", a.conn.Addr, err)
	}
	if versions && len(resp.Versions) != len(resp.Records) {
		return noVersions(a.conn.Addr, len(resp.Versions), len(resp.Records))
	}
	out := newPrinter(a.stdout, format, rt.md, versions)
	for i, rec := range resp.Records {
		var ver uint64
		if versions {
			ver = resp.Versions[i]
		}
		if err := out.print(rec, ver); err != nil {
			return err
		}
	}
	out.flush()
	if len(resp.Missing) == 0 {
		return nil
	}
	for _, m := range resp.Missing {
		fmt.Fprintf(a.stderr, "not found: %s\n", args[m])
	}
	return fmt.Errorf("%d of %d keys not found", len(resp.Missing), len(args))
}

// keyArg reads a KEY argument of get: JSON, numbers kept as their text so
// that 64-bit keys keep every digit; anything that is not JSON is a string.
func keyArg(arg string) (*structpb.Value, error) {
	if !json.Valid([]byte(arg)) {
		return structpb.NewStringValue(arg), nil // ann, "1 2": text, not one JSON value
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(arg)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return jsonValue(v)
}

func jsonValue(v any) (*structpb.Value, error) {
	switch x := v.(type) {
	case json.Number:
		return structpb.NewStringValue(x.String()), nil
	case nil:
		return nil, errors.New("null is not a key")
	case []any:
		list := &structpb.ListValue{Values: make([]*structpb.Value, len(x))}
		for i, e := range x {
			ev, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			list.Values[i] = ev
		}
		return structpb.NewListValue(list), nil
	case map[string]any:
		st := &structpb.Struct{Fields: make(map[string]*structpb.Value, len(x))}
		for k, e := range x {
			ev, err := jsonValue(e)
			if err != nil {
				return nil, err
			}
			st.Fields[k] = ev
		}
		return structpb.NewStructValue(st), nil
	}
	return structpb.NewValue(v)
}
