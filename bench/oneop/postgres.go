package oneop

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// The PostgreSQL rows (--postgres DSN): the same operations on the same
// data shape, from as many connections as Protobase has goroutines, each
// one statement per round trip: a primary-key SELECT of one row, and a
// single-row INSERT committed on its own (autocommit) with
// synchronous_commit on, so that it returns after its WAL is flushed.

// pgTable is the experiment's table; it is dropped before and after.
const pgTable = "protobase_oneop_items"

// postgres is the connections of one run of the experiment.
type postgres struct {
	conns   []*pgx.Conn
	where   string // host:port and server version, for the notes (no password)
	fsync   string // the server's fsync setting
	written atomic.Uint64
}

// openPostgres connects n times to dsn, each connection committing
// synchronously, and loads records rows shaped as the lab's items.
func openPostgres(ctx context.Context, dsn string, n, records int) (*postgres, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the DSN, password and all.
		return nil, errors.New("--postgres: not a PostgreSQL connection string or URL")
	}
	cfg.RuntimeParams["synchronous_commit"] = "on"
	pg := &postgres{}
	for range n {
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("connect to PostgreSQL at %s:%d: %w", cfg.Host, cfg.Port, err), pg.close(ctx))
		}
		pg.conns = append(pg.conns, c)
	}
	c := pg.conns[0]
	var version string
	if err := c.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return nil, errors.Join(fmt.Errorf("postgres: %w", err), pg.close(ctx))
	}
	if err := c.QueryRow(ctx, "SHOW fsync").Scan(&pg.fsync); err != nil {
		return nil, errors.Join(fmt.Errorf("postgres: %w", err), pg.close(ctx))
	}
	pg.where = fmt.Sprintf("PostgreSQL %s at %s:%d", version, cfg.Host, cfg.Port)
	if err := pg.load(ctx, records); err != nil {
		return nil, errors.Join(fmt.Errorf("postgres: load %d rows: %w", records, err), pg.close(ctx))
	}
	return pg, nil
}

// load creates the table afresh and copies in rows 0..records-1, the
// fields of bench.AppendItem's items, then vacuums and analyzes it so
// that the runs read a settled table.
func (pg *postgres) load(ctx context.Context, records int) error {
	c := pg.conns[0]
	if _, err := c.Exec(ctx, "DROP TABLE IF EXISTS "+pgTable); err != nil {
		return err
	}
	if _, err := c.Exec(ctx, "CREATE TABLE "+pgTable+
		" (id bigint PRIMARY KEY, name text NOT NULL, email text NOT NULL, created bigint NOT NULL, note text NOT NULL)"); err != nil {
		return err
	}
	rows := pgx.CopyFromSlice(records, func(i int) ([]any, error) { return pgRow(int64(i)), nil })
	if _, err := c.CopyFrom(ctx, pgx.Identifier{pgTable}, []string{"id", "name", "email", "created", "note"}, rows); err != nil {
		return err
	}
	_, err := c.Exec(ctx, "VACUUM ANALYZE "+pgTable)
	return err
}

// pgRow is item id's fields, as bench.AppendItem encodes them.
func pgRow(id int64) []any {
	return []any{id, fmt.Sprintf("name-%d", id%100000), fmt.Sprintf("user%d@example.com", id),
		1700000000000 + id, "lorem ipsum dolor sit amet, consectetur adipiscing"}
}

// close drops the table and closes every connection.
func (pg *postgres) close(ctx context.Context) error {
	var errs []error
	if len(pg.conns) > 0 {
		if _, err := pg.conns[0].Exec(ctx, "DROP TABLE IF EXISTS "+pgTable); err != nil {
			errs = append(errs, fmt.Errorf("postgres: drop table: %w", err))
		}
	}
	for _, c := range pg.conns {
		errs = append(errs, c.Close(ctx))
	}
	return errors.Join(errs...)
}

// openSelect is the postgres select row: a primary-key SELECT of one row
// per round trip, on client cl's own connection (a prepared statement,
// as pgx caches it).
func (pg *postgres) openSelect(records int) opener {
	return func(_ context.Context, cl int) (session, error) {
		c, key := pg.conns[cl], keys(records, cl)
		do := func(ctx context.Context) error {
			id := key()
			var got int64
			var name, email, note string
			var created int64
			err := c.QueryRow(ctx, "SELECT id, name, email, created, note FROM "+pgTable+" WHERE id = $1", id).
				Scan(&got, &name, &email, &created, &note)
			if err != nil {
				return fmt.Errorf("postgres select %d: %w", id, err)
			}
			if got != id {
				return fmt.Errorf("postgres select %d: row %d", id, got)
			}
			return nil
		}
		return session{do: do, close: func() error { return nil }}, nil
	}
}

// openInsert is the postgres insert row: a single-row INSERT of a new
// row per round trip, each its own transaction, committed synchronously.
func (pg *postgres) openInsert(next *ids) opener {
	return func(_ context.Context, cl int) (session, error) {
		c := pg.conns[cl]
		do := func(ctx context.Context) error {
			id := next.take()
			if _, err := c.Exec(ctx, "INSERT INTO "+pgTable+" (id, name, email, created, note) VALUES ($1, $2, $3, $4, $5)", pgRow(id)...); err != nil {
				return fmt.Errorf("postgres insert %d: %w", id, err)
			}
			pg.written.Add(1)
			return nil
		}
		return session{do: do, close: func() error { return nil }}, nil
	}
}

// check verifies the table holds the loaded rows plus every acknowledged
// insert.
func (pg *postgres) check(ctx context.Context, records int) error {
	var n int64
	if err := pg.conns[0].QueryRow(ctx, "SELECT count(*) FROM "+pgTable).Scan(&n); err != nil {
		return fmt.Errorf("postgres: count rows: %w", err)
	}
	if want := int64(records) + int64(pg.written.Load()); n != want {
		return fmt.Errorf("postgres holds %d rows, want %d loaded and inserted", n, want)
	}
	return nil
}
