// Watch against a real server: changes decoded, a start the server no
// longer keeps surfaced as OutOfRange, and a feed that survives the server
// being killed (SIGKILL) and restarted twice, each change once, in order.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { create } from "@bufbuild/protobuf";
import { connect, OutOfRange, Position, Unavailable } from "../src/index.js";
import { UserSchema } from "../examples/gen/tstest/shop_pb.js";
import { shopFiles, startServer } from "./server.js";

const USER = "tstest.shop.User";

describe("watch", () => {
  it("delivers inserts, updates and removes with their records", async () => {
    const server = await startServer();
    const db = connect(server.addr);
    try {
      await db.applySchema(shopFiles());
      const w = await db.writer("upsert");
      await w.write(USER, { id: 1, name: "Ann", age: 30 });
      const first = await w.flush();
      await w.write(USER, { id: 1, name: "Ann Lee", age: 31 });
      await w.close();
      const r = await db.writer("remove");
      await r.write(UserSchema, create(UserSchema, { id: 1n }));
      await r.close();

      const watch = db.watch([USER], { start: "oldest", oldRecords: true });
      const seen = [];
      for await (const c of watch) {
        seen.push(c);
        if (seen.length === 3) break;
      }
      assert.deepEqual(
        seen.map((c) => [c.op, c.key, c.record?.["name"], c.oldRecord?.["name"]]),
        [
          ["insert", { id: "1" }, "Ann", undefined],
          ["update", { id: "1" }, "Ann Lee", "Ann"],
          ["remove", { id: "1" }, undefined, "Ann Lee"],
        ],
      );
      assert.equal(seen[0]?.position.commit, first.position);
      assert.equal(watch.position?.toString(), seen[2]?.position.toString());

      // A watch of generated messages, started after the first change.
      const typed = db.watch([UserSchema], { start: seen[0]!.position });
      for await (const c of typed) {
        assert.equal(c.record?.name, "Ann Lee");
        break;
      }
    } finally {
      db.close();
      await server.stop();
    }
  });

  it("marks the removal of a record the reaper deleted as expired", async () => {
    const server = await startServer(["--ttl-reap-interval", "100ms"]);
    const db = connect(server.addr);
    try {
      await db.applySchema({
        "tstest/session.proto": `syntax = "proto3";
package tstest.auth;
import "protobase/v1/options.proto";
import "google/protobuf/timestamp.proto";
message Session {
  option (protobase.v1.record) = { primary_key: "id" ttl: { field: "expires_at" } };
  string id = 1;
  google.protobuf.Timestamp expires_at = 2;
}
`,
      });
      const w = await db.writer("insert");
      await w.write("tstest.auth.Session", { id: "s1", expiresAt: "2000-01-01T00:00:00Z" });
      await w.close();
      const seen = [];
      for await (const c of db.watch(["tstest.auth.Session"], { start: "oldest" })) {
        seen.push([c.op, c.key?.["id"], c.expired]);
        if (seen.length === 2) break;
      }
      assert.deepEqual(seen, [
        ["insert", "s1", false],
        ["remove", "s1", true],
      ]);
    } finally {
      db.close();
      await server.stop();
    }
  });

  it("surfaces a start older than the changes kept as OutOfRange, naming the oldest", async () => {
    const server = await startServer(["--watch-retention-bytes", "1"]);
    const db = connect(server.addr);
    try {
      await db.applySchema(shopFiles());
      let first = 0n;
      let last = 0n;
      for (let i = 0; i < 4; i++) {
        const w = await db.writer("insert");
        await w.write(USER, { id: i, name: `u${i}`, email: `u${i}@example.com` });
        const r = await w.close();
        if (i === 0) first = r.position;
        last = r.position;
      }
      // The log is trimmed in the background: poll until the start is refused.
      const deadline = Date.now() + 30_000;
      let err: unknown;
      for (;;) {
        try {
          for await (const _ of db.watch([USER], { start: new Position(first - 1n) })) break;
        } catch (e) {
          err = e;
          break;
        }
        assert.ok(Date.now() < deadline, "the change log was never trimmed");
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.ok(err instanceof OutOfRange, String(err));
      assert.ok(err.oldest && err.oldest.commit >= first && err.oldest.commit <= last, String(err.oldest));
    } finally {
      db.close();
      await server.stop();
    }
  });

  it("without resume, a server that goes away ends the watch with Unavailable", async () => {
    const server = await startServer();
    const db = connect(server.addr);
    try {
      await db.applySchema(shopFiles());
      const w = await db.writer("insert");
      await w.write(USER, { id: 1, name: "a" });
      await w.close();
      const watch = db.watch([USER], { start: "oldest", resume: false });
      await assert.rejects(
        (async () => {
          for await (const _ of watch) {
            await server.kill();
          }
        })(),
        (e: unknown) => e instanceof Unavailable || (e instanceof Error && /INTERNAL|UNKNOWN/.test(e.message)),
      );
    } finally {
      db.close();
      await server.stop();
    }
  });

  it("resumes across two server kills during a feed of 100,000 changes and one at its tail, each change once, in order", { timeout: 300_000 }, async () => {
    const N = 100_000;
    const server = await startServer();
    const db = connect(server.addr);
    try {
      await db.applySchema(shopFiles());
      const w = await db.writer("insert", { batchSize: 1000 });
      for (let i = 1; i <= N; i++) {
        await w.write(UserSchema, create(UserSchema, { id: BigInt(i), name: `u${i}` }));
      }
      assert.equal((await w.close()).records, N);

      const watch = db.watch([UserSchema], { start: "oldest", batchSize: 100, initialBackoffMs: 20 });
      let next = 1n;
      let prev: Position | undefined;
      let tailed: Promise<void> | undefined;
      for await (const c of watch) {
        assert.equal(c.record?.id, next, `change ${next}: got id ${c.record?.id}`);
        assert.ok(!prev || c.position.compare(prev) > 0, `position ${c.position} after ${prev}`);
        prev = c.position;
        if (next === 20_000n || next === 60_000n) {
          await server.kill();
          await server.start();
        }
        if (next === BigInt(N)) {
          // At the tail: the server is killed while the watch waits for
          // more, and what is written after the restart comes once too.
          tailed = new Promise((r) => setTimeout(r, 50)).then(tail);
        }
        if (next === BigInt(N + 10)) break;
        next++;
      }
      await tailed;
      assert.equal(next, BigInt(N + 10));
      assert.ok(watch.reconnects >= 3, `reconnects: ${watch.reconnects}`);

      async function tail(): Promise<void> {
        await server.kill();
        await server.start();
        const more = await db.writer("insert");
        for (let i = N + 1; i <= N + 10; i++) {
          await more.write(UserSchema, create(UserSchema, { id: BigInt(i), name: `u${i}` }));
        }
        await more.close();
      }
    } finally {
      db.close();
      await server.stop();
    }
  });
});
