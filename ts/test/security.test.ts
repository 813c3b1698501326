// API keys and TLS against servers started with --auth, --tls-cert and
// --tls-client-ca: keys created, listed and revoked, each refusal its
// error class, and a mutual-TLS connection with a CA.

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, PermissionDenied, ProtobaseError, Unauthenticated, Unavailable } from "../src/index.js";
import { REPO, shopFiles, startServer } from "./server.js";

const USER = "tstest.shop.User";

describe("API keys", () => {
  it("creates, lists and revokes keys; each refusal is its class", async () => {
    const server = await startServer(["--auth"]);
    const admin = connect(server.addr, { apiKey: server.adminKey() });
    try {
      await admin.applySchema(shopFiles());
      await assert.rejects(connect(server.addr, { apiKey: "" }).getSchema(), Unauthenticated);
      await assert.rejects(connect(server.addr, { apiKey: "pb_" + "A".repeat(32) }).getSchema(), Unauthenticated);

      const { key, info } = await admin.createKey("reader", "read", [USER]);
      assert.equal(info.name, "reader");
      assert.ok((await admin.listKeys()).some((k) => k.name === "reader"));

      const reader = connect(server.addr, { apiKey: key });
      assert.deepEqual((await reader.get(USER, [1])).records, []);
      const w = await reader.writer("insert");
      await w.write(USER, { id: 1, name: "no" });
      await assert.rejects(w.close(), PermissionDenied);
      await assert.rejects(reader.createKey("x", "admin"), PermissionDenied);

      await admin.revokeKey("reader");
      await assert.rejects(reader.get(USER, [1]), Unauthenticated);
      reader.close();
    } finally {
      admin.close();
      await server.stop();
    }
  });

  it("refuses an address without a port, naming it", () => {
    for (const bad of ["localhost", "127.0.0.1:7070/x", "::::", ""]) {
      assert.throws(() => connect(bad), (e: unknown) => e instanceof ProtobaseError && e.message.includes("host:port"), bad);
    }
    connect("https://db.example:443").close();
  });

  it("never sends a key in the clear off loopback", () => {
    assert.throws(() => connect("db.example:7070", { apiKey: "pb_" + "A".repeat(32) }), /plaintext/);
    assert.doesNotThrow(() => connect("[::1]:7070", { apiKey: "k" }).close());
  });
});

describe("TLS", () => {
  let certs: string;

  before(() => {
    certs = mkdtempSync(join(tmpdir(), "protobase-certs-"));
    execFileSync("go", ["run", "./python/tests/certgen.go", certs], { cwd: REPO, stdio: "inherit" });
  });

  after(() => rmSync(certs, { recursive: true, force: true }));

  it("connects with a CA, a client certificate and a key; refuses without them", async () => {
    const server = await startServer([
      "--auth",
      "--tls-cert",
      join(certs, "server.pem"),
      "--tls-key",
      join(certs, "server-key.pem"),
      "--tls-client-ca",
      join(certs, "ca.pem"),
    ]);
    const apiKey = server.adminKey();
    const tls = { ca: join(certs, "ca.pem"), cert: join(certs, "client.pem"), key: join(certs, "client-key.pem") };
    const db = connect(server.addr, { apiKey, tls });
    try {
      await db.applySchema(shopFiles());
      const w = await db.writer("insert");
      await w.write(USER, { id: 1, name: "over tls" });
      await w.close();
      const names: unknown[] = [];
      for await (const r of db.scan(USER)) names.push(r["name"]);
      assert.deepEqual(names, ["over tls"]);

      for (const bad of [
        connect(server.addr, { apiKey }), // plaintext to a TLS server
        connect(server.addr, { apiKey, tls: { ca: join(certs, "ca.pem") } }), // no client certificate
        connect(server.addr, { apiKey, tls: true }), // the CA is not trusted
      ]) {
        await assert.rejects(bad.getSchema(), (e: unknown) => e instanceof ProtobaseError && e instanceof Unavailable);
        bad.close();
      }
    } finally {
      db.close();
      await server.stop();
    }
  });
});
