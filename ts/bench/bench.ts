// Benchmark the Node client beside the Go client, in one run, on one
// server. Builds the repository's server and the Go side
// (python/bench/goclient), starts a durable server on loopback with a
// temporary data directory, and measures, alternating Node and Go in each
// of --runs rounds:
//
// - ingest: inserts of ~100-byte records (bench/items.proto) at batch
//   1,000 through a writer, the clock covering encoding, batching and the
//   wait until every record is durable; messages built from the server's
//   descriptors in both clients (no generated code);
// - search: primary-key lookups, 1,000 queries per request on one Search
//   stream, each request sent once the results of the one before arrived
//   (Node: Searcher.findAll; also Searcher.find, one request per query,
//   1,000 in flight).
//
// Prints the medians as a Markdown table. From ts/, after tsc:
//   node dist/bench/bench.js [--records 200000] [--lookups 100000] [--runs 3]

import { create, type DescMessage } from "@bufbuild/protobuf";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { connect, pb, type Client, type QuerySpec } from "@protobase/client";
import { REPO, Server } from "../test/server.js";

const ITEM = "protobase_lab.Item";
const NOTE = "lorem ipsum dolor sit amet, consectetur adipiscing";

const { values: args } = parseArgs({
  options: {
    records: { type: "string", default: "200000" },
    lookups: { type: "string", default: "100000" },
    batch: { type: "string", default: "1000" },
    runs: { type: "string", default: "3" },
  },
});
const records = Number(args.records);
const lookups = Number(args.lookups);
const batch = Number(args.batch);
const runs = Number(args.runs);

function item(desc: DescMessage, id: number) {
  return create(desc, {
    id: BigInt(id),
    name: `name-${id % 100000}`,
    email: `user${id}@example.com`,
    created: BigInt(1700000000000 + id),
    note: NOTE,
  } as never);
}

async function ingest(db: Client, desc: DescMessage, n: number, first: number): Promise<number> {
  const msgs = Array.from({ length: n }, (_, i) => item(desc, first + i));
  const start = performance.now();
  const w = await db.writer("insert", { batchSize: batch });
  for (const m of msgs) await w.write(desc, m);
  const r = await w.close();
  if (r.records !== n) throw new Error(`ingest: ${r.records} of ${n} records written`);
  return n / ((performance.now() - start) / 1000);
}

function lookup(desc: DescMessage, id: number): QuerySpec {
  return {
    type: desc,
    where: { expr: { case: "cmp", value: { field: "id", op: pb.Op.EQ, value: { kind: { case: "int", value: BigInt(id) } } } } },
  };
}

async function search(db: Client, desc: DescMessage, n: number, oneRequest: boolean): Promise<number> {
  const start = performance.now();
  const s = db.searcher();
  let k = 0;
  for (let done = 0; done < n; done += batch) {
    const m = Math.min(batch, n - done);
    const qs = Array.from({ length: m }, (_, j) => lookup(desc, ((k + j) * 7919) % lookups));
    k += m;
    const rs = oneRequest ? await s.findAll(qs) : await Promise.all(qs.map((q) => s.find(q.type, q)));
    for (const r of rs) {
      if (r.records.length !== 1) throw new Error(`lookup: ${r.records.length} records`);
    }
  }
  s.close();
  await s.wait();
  return n / ((performance.now() - start) / 1000);
}

function go(goclient: string, addr: string, ...a: string[]): number {
  const out = execFileSync(goclient, ["-addr", addr, ...a], { encoding: "utf8" });
  return Number(JSON.parse(out).per_sec);
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

const tmp = mkdtempSync(join(tmpdir(), "protobase-tsbench-"));
const goclient = join(tmp, "goclient");
process.env["PROTOBASE_BIN"] ??= join(tmp, "protobase");
execFileSync("go", ["build", "-o", process.env["PROTOBASE_BIN"], "./cmd/protobase"], { cwd: REPO, stdio: "inherit" });
execFileSync("go", ["build", "-o", goclient, "./python/bench/goclient"], { cwd: REPO, stdio: "inherit" });
const server = new Server();
await server.start();
try {
  const db = connect(server.addr);
  await db.applySchema({ "protobase_lab/items.proto": readFileSync(join(REPO, "bench", "items.proto"), "utf8") });
  const desc = (await db.schema()).need(ITEM);
  let nextId = 0;
  const ids = (count: number): number => {
    nextId += count;
    return nextId - count;
  };
  await ingest(db, desc, lookups, ids(lookups)); // the ids the lookups read, unmeasured

  const series: Record<string, [() => Promise<number>, (() => number) | undefined]> = {
    "ingest, messages, batch 1,000": [
      () => ingest(db, desc, records, ids(records)),
      () => go(goclient, server.addr, "-mode", "ingest", "-n", `${records}`, "-batch", `${batch}`, "-first-id", `${ids(records)}`),
    ],
    "search, primary-key lookups (findAll, 1,000 per request)": [
      () => search(db, desc, lookups, true),
      () => go(goclient, server.addr, "-mode", "search", "-n", `${lookups}`, "-batch", `${batch}`, "-ids", `${lookups}`),
    ],
    "search, primary-key lookups (find, 1,000 in flight)": [() => search(db, desc, lookups, false), undefined],
  };
  const got: Record<string, { node: number[]; go: number[]; ratio: number[] }> = {};
  for (let run = 0; run < runs; run++) {
    for (const [name, [nodeFn, goFn]] of Object.entries(series)) {
      const g = (got[name] ??= { node: [], go: [], ratio: [] });
      const a = await nodeFn();
      g.node.push(a);
      if (goFn) {
        const b = goFn();
        g.go.push(b);
        g.ratio.push(a / b);
      }
      console.error(`run ${run + 1}: ${name}: node ${a.toFixed(0)}${goFn ? `, go ${g.go.at(-1)!.toFixed(0)}` : ""}`);
    }
  }
  db.close();
  console.log(`records/s or lookups/s, median of ${runs} runs; the ratio is the median of the runs' ratios`);
  console.log("(Node and Go measured one after the other, on one server):\n");
  console.log("| workload | Node | Go | Node / Go |\n|---|---:|---:|---:|");
  const fmt = (x: number): string => Math.round(x).toLocaleString("en-US");
  for (const [name, g] of Object.entries(got)) {
    console.log(
      g.go.length
        ? `| ${name} | ${fmt(median(g.node))} | ${fmt(median(g.go))} | ${median(g.ratio).toFixed(2)} |`
        : `| ${name} | ${fmt(median(g.node))} | - | - |`,
    );
  }
} finally {
  await server.stop();
  rmSync(tmp, { recursive: true, force: true });
}
