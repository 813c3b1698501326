package main

import (
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	pb "github.com/protobase/protobase/gen/protobase/v1"
	"github.com/protobase/protobase/internal/exitstatus"
)

func TestSchemaApply(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()
	p := writeFile(t, t.TempDir(), "shop.proto", shopProto)

	r := mustCLI(t, "", "--addr", addr, "schema", "apply", "--dry-run", p)
	wantContains(t, r.stdout, "types added (1):\n  + shop.User\n", "indexes added (1):", "shop.User index email (email) unique",
		"files (1):\n  + shop.proto\n", "dry run, nothing changed")
	r = mustCLI(t, "", "--addr", addr, "schema", "get")
	wantContains(t, r.stdout, "schema version 0\nno files")

	r = mustCLI(t, "", "--addr", addr, "schema", "apply", p)
	wantContains(t, r.stdout, "types added (1):\n  + shop.User\n", "applied, schema version 1\n")

	r = mustCLI(t, "", "--addr", addr, "schema", "apply", p)
	if r.stdout != "no change\nno change, schema version 1\n" {
		t.Errorf("second apply printed:\n%s", r.stdout)
	}
}

func TestSchemaApplyIndexBuild(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()
	dir := t.TempDir()
	noIndex := strings.Replace(shopProto, ` index: { fields: "email" unique: true }`, "", 1)
	p := writeFile(t, dir, "shop.proto", noIndex)
	mustCLI(t, "", "--addr", addr, "schema", "apply", p)
	mustCLI(t, `{"id": 1, "name": "a", "email": "a@example.com"}`, "--addr", addr, "insert", "--type", "shop.User")

	writeFile(t, dir, "shop.proto", shopProto)
	r := mustCLI(t, "", "--addr", addr, "schema", "apply", "--dry-run", p)
	wantContains(t, r.stdout, "indexes added (1):\n  + shop.User index email (email) unique (would be built in background)\n",
		"files (1):\n  ~ shop.proto\n", "dry run, nothing changed")
	r = mustCLI(t, "", "--addr", addr, "schema", "apply", p)
	wantContains(t, r.stdout, "  + shop.User index email (email) unique (building in background)\n", "applied, schema version 2")
}

func TestSchemaApplyDrop(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()
	dir := t.TempDir()
	applyShop(t, addr)
	mustCLI(t, "{\"id\": 1}\n{\"id\": 2, \"email\": \"b\"}\n", "--addr", addr, "insert", "--type", "shop.User")

	other := writeFile(t, dir, "other.proto", `syntax = "proto3"; package other; message Note { string text = 1; }`)
	r := cli(t, "", "--addr", addr, "schema", "apply", other)
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "schema apply failed (FailedPrecondition)", "shop.User")

	r = mustCLI(t, "", "--addr", addr, "schema", "apply", "--dry-run", "--allow-drop", "shop.User", other)
	wantContains(t, r.stdout, "types dropped (1):\n  - shop.User (2 records to delete)\n", "  + other.proto", "  - shop.proto")
	r = mustCLI(t, "", "--addr", addr, "schema", "apply", "--allow-drop", "shop.User", other)
	wantContains(t, r.stdout, "  - shop.User (2 records deleted)\n", "applied, schema version 2")
}

func TestSchemaApplyCompileError(t *testing.T) {
	srv := startServer(t)
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.proto", "syntax = \"proto3\";\npackage bad;\nmessage A {\n  int32 a = 1\n}\n")
	r := cli(t, "", "--addr", srv.Addr(), "schema", "apply", bad)
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "schema apply failed (InvalidArgument)")
	if !regexp.MustCompile(`(?m)^bad\.proto:\d+:\d+: `).MatchString(r.stderr) {
		t.Errorf("no file:line:col in:\n%s", r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("printed a plan:\n%s", r.stdout)
	}

	missing := cli(t, "", "--addr", srv.Addr(), "schema", "apply", dir+"/missing.proto")
	wantCode(t, missing, exitstatus.Failed)
	wantContains(t, missing.stderr, "missing.proto")
}

func TestSchemaApplyImportPaths(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()
	dir := t.TempDir()
	common := writeFile(t, dir, "schema/shop/common.proto", `syntax = "proto3"; package shop; message Money { int64 cents = 1; }`)
	order := writeFile(t, dir, "schema/shop/order.proto", `syntax = "proto3"; package shop;
import "protobase/v1/options.proto";
import "shop/common.proto";
message Order { option (protobase.v1.record) = { primary_key: "id" }; int64 id = 1; Money total = 2; }`)

	// Without --root the files are keyed by base name, so the import of
	// "shop/common.proto" does not resolve.
	r := cli(t, "", "--addr", addr, "schema", "apply", "--dry-run", common, order)
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "order.proto")

	r = mustCLI(t, "", "--addr", addr, "schema", "apply", "--root", dir+"/schema", common, order)
	wantContains(t, r.stdout, "  + shop/common.proto\n  + shop/order.proto\n", "applied, schema version 1")

	// A directory argument: paths relative to it.
	r = mustCLI(t, "", "--addr", addr, "schema", "apply", dir+"/schema")
	wantContains(t, r.stdout, "no change")

	// The record type works with a nested message, through JSON.
	mustCLI(t, `{"id": "7", "total": {"cents": "1999"}}`, "--addr", addr, "insert", "--type", "shop.Order")

	// A file outside --root is a usage error.
	r = cli(t, "", "--addr", addr, "schema", "apply", "--root", dir+"/schema/shop/x", common)
	wantCode(t, r, exitstatus.Usage)
	wantContains(t, r.stderr, "is not under --root")
	// Two files with one import path.
	other := writeFile(t, dir, "other/common.proto", `syntax = "proto3"; package other;`)
	r = cli(t, "", "--addr", addr, "schema", "apply", common, other)
	wantCode(t, r, exitstatus.Usage)
	wantContains(t, r.stderr, `both have the import path "common.proto"`)
}

func TestSchemaGet(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()
	applyShop(t, addr)

	r := mustCLI(t, "", "--addr", addr, "schema", "get")
	wantContains(t, r.stdout, "schema version 1\n", "record types (1):\n  shop.User  primary key (id)\n    index email (email) unique ready\n",
		"--- shop.proto\n"+shopProto)

	r = mustCLI(t, "", "--addr", addr, "schema", "get", "--format", "json")
	var resp pb.GetSchemaResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &resp); err != nil {
		t.Fatalf("schema get --format json: %v\n%s", err, r.stdout)
	}
	if resp.GetVersion() != 1 || resp.GetFiles()["shop.proto"] != shopProto || len(resp.GetTypes()) != 1 || len(resp.GetDescriptors().GetFile()) == 0 {
		t.Errorf("schema get --format json: %v", &resp)
	}
}
