package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/protobase/protobase/client"
	"github.com/protobase/protobase/server"
)

// startWriterServer starts a server with cfg's limits and the demo schema.
func startWriterServer(t *testing.T, cfg server.Config) *client.Client {
	t.Helper()
	cfg.DataDir = t.TempDir()
	cfg.GRPCAddr = "127.0.0.1:0"
	srv, err := server.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	c, err := client.Dial(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.ApplySchema(t.Context(), map[string]string{"shop.proto": shopProto}, client.SchemaOptions{}); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestWriterLimits(t *testing.T) {
	c := startWriterServer(t, server.Config{MaxRecordsPerBatch: 50, MaxMessageBytes: 32 << 10})
	resp, err := c.GetSchema(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	limits := client.LimitsOf(resp)
	if limits != (client.Limits{MaxBatchRecords: 50, MaxMessageBytes: 32 << 10}) {
		t.Fatalf("GetSchema reports %+v", limits)
	}

	// A batch size over the limit is refused before the stream opens.
	_, err = c.NewWriter(t.Context(), client.Insert, client.WriterOptions{BatchRecords: 51, Limits: limits})
	var le *client.LimitError
	if !errors.As(err, &le) || le.Limit != "max_batch_records" || le.Max != 50 || le.Got != 51 {
		t.Fatalf("NewWriter with 51 records per batch: %v", err)
	}

	// A record too large for any request is refused; the writer goes on,
	// and batches are cut short where the message limit needs it.
	w, err := c.NewWriter(t.Context(), client.Insert, client.WriterOptions{BatchRecords: 50, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	err = w.WriteAny(user(1, strings.Repeat("x", 40<<10)))
	if !errors.As(err, &le) || le.Limit != "max_message_bytes" || le.Max != 32<<10 {
		t.Fatalf("a 40 KiB record: %v", err)
	}
	for i := int64(2); i <= 21; i++ {
		if err := w.WriteAny(user(i, fmt.Sprintf("%d%s", i, strings.Repeat("x", 5000)))); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	ack, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if ack.Records != 20 || w.Durable() != 20 {
		t.Errorf("acknowledged %d, durable %d; want 20", ack.Records, w.Durable())
	}
	// 6 records of 5 KB fit in 32 KiB: 4 batches and the last one.
	if ack.Batch < 3 {
		t.Errorf("last batch %d: the batches were not cut at the message limit", ack.Batch)
	}
}

func TestWriterDurableAfterError(t *testing.T) {
	c := startWriterServer(t, server.Config{})
	w, err := c.NewWriter(t.Context(), client.Insert, client.WriterOptions{BatchRecords: 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 25; i++ {
		if err := w.WriteAny(user(i, fmt.Sprintf("u%d@example.com", i))); err != nil {
			t.Fatal(err)
		}
	}
	_ = w.WriteAny(user(1, "again@example.com")) // in the third batch
	if _, err := w.Close(); err == nil {
		t.Fatal("a duplicate key was accepted")
	}
	if got := w.Durable(); got != 20 {
		t.Errorf("durable %d after the third batch failed; want 20", got)
	}
}
