// Test helpers: the repository's protobase binary (PROTOBASE_BIN, or built
// here with go build) serving on a free loopback port with a fresh data
// directory, and the test schema.

import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

const here = dirname(fileURLToPath(import.meta.url));
// dist/test -> ts -> repository root
export const TS_DIR = resolve(here, "..", "..");
export const REPO = resolve(TS_DIR, "..");

let built: string | undefined;

/** The protobase binary: PROTOBASE_BIN, or one built from this repository. */
export function binary(): string {
  const env = process.env["PROTOBASE_BIN"];
  if (env) return env;
  if (!built) {
    const out = join(mkdtempSync(join(tmpdir(), "protobase-bin-")), "protobase");
    execFileSync("go", ["build", "-o", out, "./cmd/protobase"], { cwd: REPO, stdio: "inherit" });
    built = out;
  }
  return built;
}

export class Server {
  addr = "";
  proc: ChildProcess | undefined;
  readonly data: string;
  readonly args: string[];
  private readonly root: string;

  constructor(args: string[] = []) {
    this.root = mkdtempSync(join(tmpdir(), "protobase-ts-"));
    this.data = join(this.root, "data");
    this.args = args;
  }

  /** Start the server (on the port it had, when it ran before) and wait until it serves. */
  async start(): Promise<void> {
    const addr = this.addr || "127.0.0.1:0";
    const proc = spawn(
      binary(),
      ["serve", "--data", this.data, "--grpc-addr", addr, "--memtable-bytes", String(16 << 20), ...this.args],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    this.proc = proc;
    let log = "";
    proc.stderr!.on("data", (b: Buffer) => {
      log = (log + b.toString()).slice(-8000);
    });
    const lines = createInterface({ input: proc.stdout! });
    const first = await new Promise<string>((resolveLine, reject) => {
      const timer = setTimeout(() => reject(new Error(`server did not start in time:\n${log}`)), 60_000);
      lines.once("line", (l) => {
        clearTimeout(timer);
        resolveLine(l);
      });
      proc.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`server exited (${code}) before serving:\n${log}`));
      });
    });
    const m = /protobase serving on (\S+) /.exec(first);
    if (!m) {
      proc.kill("SIGKILL");
      throw new Error(`server did not start (${first}):\n${log}`);
    }
    this.addr = m[1]!;
    lines.on("line", () => {}); // drain stdout so the server never blocks on it
  }

  /** Kill the server at once (SIGKILL) and wait until it is gone. */
  async kill(): Promise<void> {
    const p = this.proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const gone = new Promise((r) => p.once("exit", r));
    p.kill("SIGKILL");
    await gone;
  }

  /** Stop the server and remove its data. */
  async stop(): Promise<void> {
    const p = this.proc;
    if (p && p.exitCode === null && p.signalCode === null) {
      const gone = new Promise((r) => p.once("exit", r));
      p.kill("SIGTERM");
      const t = setTimeout(() => p.kill("SIGKILL"), 30_000);
      await gone;
      clearTimeout(t);
    }
    rmSync(this.root, { recursive: true, force: true });
  }

  adminKey(): string {
    return readFileSync(join(this.data, "admin.key"), "utf8").trim();
  }

  get root_(): string {
    return this.root;
  }
}

export async function startServer(args: string[] = []): Promise<Server> {
  const s = new Server(args);
  await s.start();
  return s;
}

/** The tests' schema (test/proto/tstest/shop.proto), as import path to text. */
export function shopFiles(): Record<string, string> {
  const p = join(TS_DIR, "test", "proto", "tstest", "shop.proto");
  if (!existsSync(p)) throw new Error(`missing ${p}`);
  return { "tstest/shop.proto": readFileSync(p, "utf8") };
}
