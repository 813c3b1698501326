package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/protobase/protobase/internal/exitstatus"
)

func (a *app) queryCommand() *cobra.Command {
	var o readOptions
	var pageSize uint32
	var token string
	var all bool
	var agg aggOptions
	cmd := &cobra.Command{
		Use:   "query --type FULL.NAME [--where EXPR] [--page-size N] [--token TOKEN | --all] [--group-by F,... --agg FUNCS] [flags]",
		Short: "Read one page of a query's matches, or every page",
		Long: `query reads the matches of one query a page at a time (the Query call) and
prints them, one JSON object per line (or a table). Without --all it prints
one page and, when more follow, the token of the next page on stderr
("next page: --token TOKEN"); pass it back with --token to continue. With
--all it reads every page. A token resumes after the last key of its page, so
reading N records costs O(N) however many pages they take. The filter syntax
is that of "protobase search --help".

With --agg (or --group-by) it prints aggregates of the matches instead: one
JSON object per group, ordered by group, holding the group's field values and
each function's value under its text, e.g.
{"team":"red","count()":12,"sum(score)":340,"avg(age)":31.5}. Functions are
count(), count(FIELD), sum, min, max and avg of a field; --group-by alone
counts. A field or function named twice is one key. Integers past 2^53 print as strings, an absent value as null
(docs/read.md, Aggregation).`,
		Example: `  protobase query --type shop.User --where 'age >= 30' --page-size 100
  protobase query -t shop.User -w 'age >= 30' --page-size 100 --token CAES...
  protobase query -t shop.User --all --page-size 1000 > users.jsonl
  protobase query -t shop.User -w 'age >= 30' --group-by team --agg 'count(),sum(score),avg(age)'`,
		Args: cobra.NoArgs,
	}
	o.register(cmd)
	f := cmd.Flags()
	f.Uint32Var(&pageSize, "page-size", 0, "records per page (0: the server's default)")
	f.StringVar(&token, "token", "", "continue after the page that printed this token")
	f.BoolVar(&all, "all", false, "read every page, not just one")
	f.StringSliceVar(&agg.groupBy, "group-by", nil, "aggregate: group by these fields (comma-separated)")
	f.StringVar(&agg.funcs, "agg", "", `aggregate: functions to print per group, e.g. 'count(),sum(score),avg(age)'`)
	cmd.MarkFlagsMutuallyExclusive("token", "all")
	cmd.RunE = exitstatus.RunE(func(cmd *cobra.Command, _ []string) error {
		if agg.funcs != "" || len(agg.groupBy) > 0 {
			return a.aggregate(cmd.Context(), &o, &agg)
		}
		return a.query(cmd.Context(), &o, pageSize, token, all)
	})
	return cmd
}

func (a *app) query(ctx context.Context, o *readOptions, pageSize uint32, token string, all bool) error {
	c, q, out, err := a.openRead(ctx, o)
	if err != nil {
		return err
	}
	defer c.Close()
	defer out.flush()
	for {
		p, err := c.Query(ctx, q, pageSize, token)
		if err != nil {
			return callError("query", a.conn.Addr, err)
		}
		if o.versions && len(p.Versions) != len(p.Records) {
			return noVersions(a.conn.Addr, len(p.Versions), len(p.Records))
		}
		for i, rec := range p.Records {
			var ver uint64
			if o.versions {
				ver = p.Versions[i]
			}
			if err := out.print(rec, ver); err != nil {
				return err
			}
		}
		if o.explain && p.Plan != nil {
			fmt.Fprintf(a.stderr, "plan: %s\n", p.Plan.GetText())
		}
		if o.count {
			fmt.Fprintln(a.stdout, p.Count)
			return nil
		}
		if p.Token == "" {
			return nil
		}
		if !all {
			out.flush()
			fmt.Fprintf(a.stderr, "next page: --token %s\n", p.Token)
			return nil
		}
		token = p.Token
	}
}
