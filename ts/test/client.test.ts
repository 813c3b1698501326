// The client against a real server: schema, writer, reads, search, errors.

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import {
  AlreadyExists,
  connect,
  InvalidArgument,
  NotFound,
  ProtobaseError,
  ResourceExhausted,
  type Client,
} from "../src/index.js";
import { UserSchema, OrderSchema } from "../examples/gen/tstest/shop_pb.js";
import { shopFiles, startServer, type Server } from "./server.js";

describe("client", () => {
  let server: Server;
  let db: Client;

  before(async () => {
    server = await startServer();
    db = connect(server.addr);
    await db.applySchema(shopFiles());
    const w = await db.writer("insert");
    for (let i = 1; i <= 50; i++) {
      await w.write("tstest.shop.User", { id: i, name: `user${i}`, email: `u${i}@example.com`, age: 20 + (i % 30) });
    }
    const r = await w.close();
    assert.equal(r.records, 50);
  });

  after(async () => {
    db.close();
    await server.stop();
  });

  it("applies a schema in add mode and reads it back", async () => {
    const plan = await db.applySchema(shopFiles(), { add: true });
    assert.equal(plan.plan?.typesAdded.length, 0);
    const s = await db.getSchema();
    assert.ok(s.types.some((t) => t.name === "tstest.shop.User"));
    assert.ok(s.files["tstest/shop.proto"]);
  });

  it("writes generated messages and reads them back typed", async () => {
    const w = await db.writer("upsert", { batchSize: 2 });
    for (let i = 100; i < 105; i++) {
      await w.write(UserSchema, create(UserSchema, { id: BigInt(i), name: `gen${i}`, email: `g${i}@example.com`, age: 40 }));
    }
    await w.write(OrderSchema, create(OrderSchema, { userId: 100n, number: 1, total: 9.5 }));
    const r = await w.close();
    assert.equal(r.records, 6);
    assert.equal(r.batches, 3);
    assert.ok(r.position > 0n);
    const got = await db.get(UserSchema, [100n, 104, 999]);
    assert.deepEqual(
      got.records.map((u) => [u.id, u.name]),
      [
        [100n, "gen100"],
        [104n, "gen104"],
      ],
    );
    assert.deepEqual(got.missing, [2]);
    const order = await db.get(OrderSchema, [[100, 1]]);
    assert.equal(order.records[0]?.total, 9.5);
  });

  it("reads JSON records by key, in pages and by scan", async () => {
    const got = await db.get("tstest.shop.User", [3]);
    assert.deepEqual(got.records, [{ id: "3", name: "user3", email: "u3@example.com", age: 23 }]);
    const ids: string[] = [];
    let pages = 0;
    for await (const page of db.pages("tstest.shop.User", { filter: "id <= 25", pageSize: 10 })) {
      pages++;
      for (const r of page.records) ids.push(String(r["id"]));
    }
    assert.equal(pages, 3);
    assert.equal(ids.length, 25);
    let n = 0;
    for await (const u of db.scan(UserSchema, { filter: "age >= 40", parallelism: 4 })) {
      assert.ok(u.age >= 40);
      n++;
    }
    assert.ok(n > 0);
  });

  it("runs many searches in flight on one stream", async () => {
    const s = db.searcher();
    const found = await Promise.all(
      Array.from({ length: 200 }, (_, i) => s.find(UserSchema, { filter: `id = ${(i % 50) + 1}` })),
    );
    s.close();
    found.forEach((r, i) => assert.equal(r.records[0]?.id, BigInt((i % 50) + 1)));
    const results = await db.search([
      { type: "tstest.shop.User", filter: 'name prefix "user1"', count: true },
      { type: "tstest.shop.User", filter: "nosuchfield = 1" },
    ]);
    assert.equal(results[0]?.count, 11n);
    const err = results[1]?.error;
    assert.ok(err instanceof InvalidArgument, String(err));
    assert.equal(err.query, 1);
  });

  it("answers a search's plan and versions", async () => {
    const [r] = await db.search([{ type: UserSchema, filter: "id = 3", explain: true, versions: true }]);
    assert.equal(r?.error, undefined);
    assert.equal(r?.records.length, 1);
    assert.ok(r?.plan?.access, `plan: ${r?.plan?.text}`);
    assert.equal(r?.versions.length, 1);
    assert.ok(r.versions[0]! > 0n);
  });

  it("names the field of a bad filter (google.rpc.BadRequest)", async () => {
    await assert.rejects(db.query("tstest.shop.User", { filter: "age >> 3" }), (e: unknown) => {
      assert.ok(e instanceof InvalidArgument, String(e));
      assert.equal(e.field, "query.filter");
      assert.match(e.message, /column/);
      return true;
    });
  });

  it("names the batch, record and field of a refused write", async () => {
    const w = await db.writer("insert", { batchSize: 3 });
    await w.write("tstest.shop.User", { id: 200, name: "a", email: "a200@example.com" });
    await w.write("tstest.shop.User", { id: 201, name: "b", email: "b201@example.com" });
    await w.write("tstest.shop.User", { id: 202, name: "c", email: "c202@example.com" });
    await w.write("tstest.shop.User", { id: 203, name: "d", email: "d203@example.com" });
    await w.write("tstest.shop.User", { id: 204, name: "e", email: "u7@example.com" }); // taken by user 7
    const err = await w.close().then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof AlreadyExists, String(err));
    assert.ok(err instanceof ProtobaseError);
    assert.equal(err.batch, 1);
    assert.equal(err.record, 1);
    assert.equal(err.type, "tstest.shop.User");
    assert.equal(err.field, "email");
    assert.equal(err.batchesApplied, 1);
    assert.equal(err.recordsApplied, 3);
    await assert.rejects(w.write("tstest.shop.User", { id: 205 }), AlreadyExists);
  });

  it("refuses JSON that does not convert, naming the type", async () => {
    const w = await db.writer("insert");
    await assert.rejects(w.write("tstest.shop.User", { id: 1, nosuch: 2 }), (e: unknown) => {
      assert.ok(e instanceof ProtobaseError);
      assert.equal(e.type, "tstest.shop.User");
      assert.equal(e.record, 0);
      return true;
    });
    await assert.rejects(w.write("tstest.shop.Nope", {}), /no message type "tstest.shop.Nope"/);
    await w.close();
  });

  it("writes JSON of a type another client applied after this one read the schema", async () => {
    await db.schema(); // cached before the other client's apply
    const other = connect(server.addr);
    await other.applySchema(
      { "tstest/extra.proto": 'syntax = "proto3";\npackage tstest.extra;\nimport "protobase/v1/options.proto";\nmessage Note {\n  option (protobase.v1.record) = { primary_key: "id" };\n  int64 id = 1;\n  string text = 2;\n}\n' },
      { add: true },
    );
    other.close();
    const w = await db.writer("insert");
    await w.write("tstest.extra.Note", { id: 1, text: "hello" });
    await w.close();
    assert.deepEqual((await db.get("tstest.extra.Note", [1])).records, [{ id: "1", text: "hello" }]);
  });

  it("raises NotFound for an update of a missing record", async () => {
    const w = await db.writer("update");
    await w.write(UserSchema, create(UserSchema, { id: 12345n, name: "ghost" }));
    await assert.rejects(w.close(), (e: unknown) => {
      assert.ok(e instanceof NotFound, String(e));
      assert.equal(e.record, 0);
      return true;
    });
  });
});

describe("write limits", () => {
  it("refuses a record over the server's message limit before sending it, and goes on", async () => {
    const server = await startServer(["--max-message-bytes", "4096"]);
    const db = connect(server.addr);
    try {
      await db.applySchema(shopFiles());
      const w = await db.writer("insert");
      await assert.rejects(w.write("tstest.shop.User", { id: 1, name: "x".repeat(5000) }), (e: unknown) => {
        assert.ok(e instanceof ResourceExhausted, String(e));
        assert.equal(e.type, "tstest.shop.User");
        return true;
      });
      await w.write("tstest.shop.User", { id: 2, name: "fits" });
      // Records that fit one by one but not together go in several requests.
      for (let i = 3; i < 13; i++) await w.write("tstest.shop.User", { id: i, name: "y".repeat(1000) });
      const r = await w.close();
      assert.equal(r.records, 11);
      assert.ok(r.batches > 1, `batches: ${r.batches}`);
      const ids: string[] = [];
      for await (const u of db.scan("tstest.shop.User")) ids.push(String(u["id"]));
      assert.equal(ids.length, 11);
      assert.ok(!ids.includes("1"));
    } finally {
      db.close();
      await server.stop();
    }
  });
});
