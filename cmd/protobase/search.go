package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/client/where"
	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/exitstatus"
)

// readOptions are the flags search and scan share.
type readOptions struct {
	typ      string
	where    string
	limit    uint64
	order    string
	count    bool
	explain  bool
	keysOnly bool
	versions bool
	format   string
	// scan only
	parallelism uint32
}

func (o *readOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVarP(&o.typ, "type", "t", "", "record type to read, as a full name (required)")
	f.StringVarP(&o.where, "where", "w", "", `filter, e.g. 'age >= 30 and (name prefix "An" or email contains "@example")'`)
	f.Uint64Var(&o.limit, "limit", 0, "return at most N records (0: no limit)")
	f.StringVar(&o.order, "order", "", `order by the primary key ("pk") or an index, by name or by its first field; append " desc" to reverse`)
	f.BoolVar(&o.count, "count", false, "print only the number of matches")
	f.BoolVar(&o.explain, "explain", false, "print the chosen plan to stderr")
	f.BoolVar(&o.keysOnly, "keys-only", false, "return records holding only their primary-key fields")
	f.BoolVar(&o.versions, "versions", false, `print each record's version: {"version": "N", "record": {...}} (table: a first column)`)
	f.StringVar(&o.format, "format", "jsonl", "output format: jsonl or table")
	_ = cmd.MarkFlagRequired("type")
}

func (a *app) searchCommand() *cobra.Command {
	var o readOptions
	cmd := &cobra.Command{
		Use:   "search --type FULL.NAME [--where EXPR] [flags]",
		Short: "Find records with a query on a Search stream",
		Long: `search runs one query on a Search stream and prints the matches, one JSON
object per line (or a table). The filter syntax:

  comparisons   field = v, !=, <, <=, >, >=; field in (v1, v2); field prefix "s";
                field contains "s"; a bare bool field means field = true
  combinations  and, or, not, parentheses
  values        integers, floats, "strings", b"bytes", true/false, ENUM_NAMES
  fields        dotted paths through messages (address.city); a repeated
                field matches when any element does`,
		Example: `  protobase search --type shop.User --where 'age >= 30 and name prefix "An"'
  protobase search -t shop.User -w 'id in (1, 2, 3)' --format table
  protobase search -t shop.User --order "name desc" --limit 10 --explain`,
		Args: cobra.NoArgs,
	}
	o.register(cmd)
	cmd.RunE = exitstatus.RunE(func(cmd *cobra.Command, _ []string) error {
		return a.read(cmd.Context(), &o, false)
	})
	return cmd
}

func (a *app) scanCommand() *cobra.Command {
	var o readOptions
	cmd := &cobra.Command{
		Use:   "scan --type FULL.NAME [--where EXPR] [--parallelism N] [flags]",
		Short: "Stream every match of a query, reading in parallel on the server",
		Long: `scan streams every match of one query from the server, which splits the key
range into parts read concurrently (--parallelism). Without --order the
parts' results interleave; with it they arrive in key order. The filter
syntax is that of "protobase search --help".`,
		Example: `  protobase scan --type shop.User --parallelism 4 > users.jsonl
  protobase scan -t shop.User -w 'email contains "@example.com"' --count`,
		Args: cobra.NoArgs,
	}
	o.register(cmd)
	cmd.Flags().Uint32Var(&o.parallelism, "parallelism", 1, "concurrent readers on the server")
	cmd.RunE = exitstatus.RunE(func(cmd *cobra.Command, _ []string) error {
		return a.read(cmd.Context(), &o, true)
	})
	return cmd
}

// openRead turns the read flags into a query, dials the server, and makes
// the printer for the query's type; the caller closes the client.
func (a *app) openRead(ctx context.Context, o *readOptions) (*client.Client, *pb.Query, *printer, error) {
	q, err := o.query()
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := a.dial()
	if err != nil {
		return nil, nil, nil, err
	}
	rt, err := loadRecordType(ctx, c, a.conn.Addr, q.Type)
	if err == nil && o.order != "" {
		q.Order, err = resolveOrder(ctx, c, a.conn.Addr, q.Type, o.order)
	}
	if err != nil {
		c.Close()
		return nil, nil, nil, err
	}
	return c, q, newPrinter(a.stdout, o.format, rt.md, o.versions), nil
}

// read runs search (scan false) or scan: the same query and output, over a
// Search stream or a Scan.
func (a *app) read(ctx context.Context, o *readOptions, scan bool) error {
	c, q, out, err := a.openRead(ctx, o)
	if err != nil {
		return err
	}
	defer c.Close()
	defer out.flush()
	var count uint64
	var plan *pb.Plan
	if scan {
		count, plan, err = a.scanRecords(ctx, c, q, o.parallelism, out)
	} else {
		count, plan, err = a.searchRecords(ctx, c, q, out)
	}
	if err != nil {
		return err
	}
	if o.explain && plan != nil {
		fmt.Fprintf(a.stderr, "plan: %s\n", plan.GetText())
	}
	if o.count {
		fmt.Fprintln(a.stdout, count)
	}
	return nil
}

// query checks the flags that need no server and builds the query from
// them; --order needs the schema and is resolved later.
func (o *readOptions) query() (*pb.Query, error) {
	if o.format != "jsonl" && o.format != "table" {
		return nil, exitstatus.Usagef("--format %q: want jsonl or table", o.format)
	}
	q := &pb.Query{Type: strings.TrimPrefix(o.typ, typeURLPrefix), Limit: o.limit, Count: o.count, Explain: o.explain,
		KeysOnly: o.keysOnly, Versions: o.versions}
	if o.where != "" {
		// Parsed here for the caret under a syntax error, then sent as
		// text: the server parses it with the same parser and points at
		// the column of a field its schema refuses.
		_, err := where.Parse(o.where)
		if err != nil {
			var se *where.SyntaxError
			if errors.As(err, &se) {
				return nil, exitstatus.UsageError(fmt.Errorf("--where:\n%s", se.Pretty()))
			}
			return nil, exitstatus.UsageError(fmt.Errorf("--where: %w", err))
		}
		q.Filter = o.where
	}
	return q, nil
}

// scanRecords prints every match of q read by a Scan, and returns the
// count and plan the server reports.
func (a *app) scanRecords(ctx context.Context, c *client.Client, q *pb.Query, parallelism uint32, out *printer) (uint64, *pb.Plan, error) {
	sc := c.Scan(ctx, q, client.ScanOptions{Parallelism: parallelism})
	for sc.Next() {
		if err := out.print(sc.Record(), sc.Version()); err != nil {
			sc.Close()
			return 0, nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return 0, nil, callError("scan", a.conn.Addr, err)
	}
	return sc.Count(), sc.Plan(), nil
}

// searchRecords prints every match of q read on a Search stream, and
// returns the count and plan the server reports.
func (a *app) searchRecords(ctx context.Context, c *client.Client, q *pb.Query, out *printer) (uint64, *pb.Plan, error) {
	s, err := c.NewSearch(ctx)
	if err != nil {
		return 0, nil, callError("search", a.conn.Addr, err)
	}
	res, err := s.Query(q)
	if err != nil {
		return 0, nil, callError("search", a.conn.Addr, err)
	}
	for {
		rec, err := res.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var qe *client.QueryError
			if errors.As(err, &qe) {
				return 0, nil, queryFailed(qe)
			}
			return 0, nil, callError("search", a.conn.Addr, err)
		}
		if err := out.print(rec, res.Version()); err != nil {
			return 0, nil, err
		}
	}
	_ = s.Close()
	return res.Count(), res.Plan(), nil
}

// queryFailed reports a query the server refused, naming the field it
// refused unless the message already does.
func queryFailed(qe *client.QueryError) error {
	msg := qe.Msg
	if qe.Field != "" && !strings.Contains(msg, qe.Field) {
		msg = "field " + qe.Field + ": " + msg
	}
	return fmt.Errorf("search failed (%v): %s", qe.Code, msg)
}

// resolveOrder maps --order ("pk", an index name, or an index's first
// field, optionally followed by "desc" or "asc") to the query's Order.
func resolveOrder(ctx context.Context, c *client.Client, addr, typ, s string) (*pb.Order, error) {
	words := strings.Fields(s)
	if len(words) == 0 || len(words) > 2 {
		return nil, exitstatus.Usagef("--order %q: want FIELD or INDEX, optionally followed by desc", s)
	}
	o := &pb.Order{}
	if len(words) == 2 {
		switch strings.ToLower(words[1]) {
		case "desc":
			o.Descending = true
		case "asc":
		default:
			return nil, exitstatus.Usagef("--order %q: %q is not asc or desc", s, words[1])
		}
	}
	resp, err := c.GetSchema(ctx)
	if err != nil {
		return nil, callError("get the schema", addr, err)
	}
	for _, t := range resp.GetTypes() {
		if t.GetName() != typ {
			continue
		}
		name := words[0]
		if name == "pk" || (len(t.PrimaryKey) > 0 && name == t.PrimaryKey[0]) {
			return o, nil
		}
		var options []string
		for _, ix := range t.GetIndexes() {
			if ix.GetName() == name || ix.GetFields()[0] == name {
				o.Index = ix.GetName()
				return o, nil
			}
			options = append(options, ix.GetName())
		}
		return nil, exitstatus.Usagef("--order %q: %s has no index on %q (its indexes: %s; or pk)", s, typ, name, strings.Join(options, ", "))
	}
	return nil, fmt.Errorf("unknown record type %q", typ)
}
