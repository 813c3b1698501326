// The README's quick start from Node: apply shop.proto, write users, then
// search, page, get and watch them. Run it against a server (make serve):
//
//   node dist/examples/quickstart.js [path/to/shop.proto] [address]
//
// shop.User's messages come from protoc-gen-es (examples/gen/shop_pb.ts);
// the same calls take JSON and a type name instead.

import { readFileSync } from "node:fs";
import { create } from "@bufbuild/protobuf";
import { AlreadyExists, connect } from "@protobase/client";
import { UserSchema } from "./gen/shop_pb.js";

const file = process.argv[2] ?? "shop.proto";
const db = connect(process.argv[3] ?? process.env["PROTOBASE_ADDR"] ?? "127.0.0.1:7070"); // apiKey: ..., tls: { ca: "ca.pem" }

const plan = await db.applySchema({ "shop.proto": readFileSync(file, "utf8") }, { add: true });
console.log(`schema version ${plan.version}`);

// An upsert writer, so that the example runs again; batches of 1,000 by default.
const w = await db.writer("upsert");
await w.write(UserSchema, create(UserSchema, { id: 101n, name: "Ada", email: "ada@example.com", age: 36 }));
await w.write("shop.User", { id: 102, name: "Alan", email: "alan@example.com", age: 41 }); // JSON, by type name
const written = await w.close();
console.log("wrote", written.records, "records");

// A unique email taken by another user: the error names batch, record and field.
const ins = await db.writer("insert");
await ins.write("shop.User", { id: 103, name: "Ada again", email: "ada@example.com" });
try {
  await ins.close();
} catch (e) {
  if (!(e instanceof AlreadyExists)) throw e;
  console.log("refused:", e.constructor.name, "batch", e.batch, "record", e.record, "field", e.field);
}

// Many searches in flight on one stream.
const s = db.searcher();
const [ada, over40] = await Promise.all([
  s.find(UserSchema, { filter: 'email = "ada@example.com"' }),
  s.find("shop.User", { filter: 'age > 40 and name prefix "Al"' }),
]);
s.close();
console.log("ada:", ada.records[0]?.name, "| over 40:", over40.records.map((u) => u["name"]));

for await (const page of db.pages(UserSchema, { filter: "id >= 101", pageSize: 1 })) {
  console.log("page:", page.records.map((u) => u.name));
}

const got = await db.get("shop.User", [101, 999]);
console.log("get:", JSON.stringify(got.records), "missing:", got.missing);

// The changes since the first write, until the last one is seen.
const watch = db.watch([UserSchema], { start: "oldest" });
for await (const c of watch) {
  if (c.record?.id === 102n) {
    console.log("watch:", c.op, c.record.name, "at", c.position.toString());
    break;
  }
}
db.close();
