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

// invProto declares a record type in a file of its own, beside shop.proto.
const invProto = `syntax = "proto3";
package inv;
import "protobase/v1/options.proto";
message Item {
  option (protobase.v1.record) = { primary_key: "sku" };
  string sku = 1;
  int32 count = 2;
}
`

func TestSchemaApplyAdd(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()
	dir := t.TempDir()
	applyShop(t, addr)
	inv := writeFile(t, dir, "inv.proto", invProto)

	// Without --add the file is the whole schema, and shop.User would go.
	r := cli(t, "", "--addr", addr, "schema", "apply", inv)
	wantCode(t, r, exitstatus.Failed)

	r = mustCLI(t, "", "--addr", addr, "schema", "apply", "--add", "--dry-run", inv)
	wantContains(t, r.stdout, "types added (1):\n  + inv.Item\n", "files (1):\n  + inv.proto\n", "dry run, nothing changed")
	r = mustCLI(t, "", "--addr", addr, "schema", "apply", "--add", inv)
	wantContains(t, r.stdout, "types added (1):\n  + inv.Item\n", "applied, schema version 2\n")
	if strings.Contains(r.stdout, "dropped") || strings.Contains(r.stdout, "shop.proto") {
		t.Errorf("--add touched the other file:\n%s", r.stdout)
	}
	r = mustCLI(t, "", "--addr", addr, "schema", "get")
	wantContains(t, r.stdout, "shop.User", "email", "inv.Item")

	// Replacing a file by name: a field added to inv.Item.
	writeFile(t, dir, "inv.proto", strings.Replace(invProto, "int32 count = 2;", "int32 count = 2;\n  string place = 3;", 1))
	r = mustCLI(t, "", "--addr", addr, "schema", "apply", "--add", inv)
	wantContains(t, r.stdout, "types changed (1):\n  ~ inv.Item\n", "  ~ inv.proto\n", "applied, schema version 3\n")

	// Removing a file by name: its type is dropped only when allowed.
	r = cli(t, "", "--addr", addr, "schema", "apply", "--add", "--remove", "inv.proto")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "type inv.Item: would be dropped", "nothing was changed; to drop them with their data, add: --allow-drop inv.Item\n")
	r = mustCLI(t, "", "--addr", addr, "schema", "apply", "--add", "--remove", "inv.proto", "--allow-drop", "inv.Item")
	wantContains(t, r.stdout, "types dropped (1):\n  - inv.Item (0 records deleted)\n", "files (1):\n  - inv.proto\n", "applied, schema version 4\n")

	r = cli(t, "", "--addr", addr, "schema", "apply", "--add", "--remove", "inv.proto")
	wantCode(t, r, exitstatus.Failed)
	wantContains(t, r.stderr, "schema apply failed (InvalidArgument)", "file inv.proto is not in the schema")
	r = cli(t, "", "--addr", addr, "schema", "apply", "--remove", "shop.proto")
	wantCode(t, r, exitstatus.Usage)
	wantContains(t, r.stderr, "--remove needs --add")
}

func TestSchemaApplyIndexDropGuard(t *testing.T) {
	srv := startServer(t)
	addr := srv.Addr()
	dir := t.TempDir()
	applyShop(t, addr)
	noIndex := writeFile(t, dir, "shop.proto", strings.Replace(shopProto, ` index: { fields: "email" unique: true }`, "", 1))

	for _, dry := range []string{"--dry-run", "--add"} {
		r := cli(t, "", "--addr", addr, "schema", "apply", dry, noIndex)
		wantCode(t, r, exitstatus.Failed)
		wantContains(t, r.stderr, "schema apply failed (FailedPrecondition)", "index shop.User.email: would be dropped",
			"nothing was changed; to drop them with their data, add: --allow-drop shop.User.email\n")
	}
	r := mustCLI(t, "", "--addr", addr, "schema", "get")
	wantContains(t, r.stdout, "email")

	r = mustCLI(t, "", "--addr", addr, "schema", "apply", "--dry-run", "--allow-drop", "shop.User.email", noIndex)
	wantContains(t, r.stdout, "indexes dropped (1):\n  - shop.User index email (email) unique\n", "dry run, nothing changed")
	r = mustCLI(t, "", "--addr", addr, "schema", "apply", "--allow-drop", "shop.User.email", noIndex)
	wantContains(t, r.stdout, "indexes dropped (1):\n  - shop.User index email (email) unique\n", "applied, schema version 2")
}
