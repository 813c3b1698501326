// Watch: the changes to records of some types, in commit order, as an
// async iterator. After a transport failure or a server restart it
// reconnects on its own, after the position of the last change (or
// progress mark) it delivered, with backoff, so every change comes once.
// A start older than the changes the server keeps (OUT_OF_RANGE) is thrown,
// never skipped.

import { create, type DescMessage } from "@bufbuild/protobuf";
import type { Any } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { ChangeOp, WatchRequestSchema, WatchStartSchema, type WatchStart } from "./gen/protobase/v1/protobase_pb.js";
import type { Client, QueryOptions } from "./client.js";
import { fromCall, ProtobaseError } from "./errors.js";
import { Position } from "./position.js";
import { typeName, typeNameOf, unpackMessage, type RecordType, type Schema } from "./records.js";

export type ChangeOpName = "insert" | "update" | "remove";

const opNames: Record<number, ChangeOpName> = {
  [ChangeOp.INSERT]: "insert",
  [ChangeOp.UPDATE]: "update",
  [ChangeOp.REMOVE]: "remove",
};

/** Where a watch starts: now, the oldest change kept, or after a position ("C", "C.I", a commit). */
export type WatchStartAt = "now" | "oldest" | Position | bigint | string;

export interface WatchOptions {
  filter?: string;
  where?: QueryOptions["where"];
  start?: WatchStartAt;
  /** Ask for the record before each update and remove. */
  oldRecords?: boolean;
  /** Changes per message the server sends (0: its default). */
  batchSize?: number;
  /** Reconnect after a transport failure (default true). */
  resume?: boolean;
  /** The first wait before reconnecting (default 50 ms); it doubles on each failure, up to maxBackoffMs. */
  initialBackoffMs?: number;
  /** The longest wait between reconnects (default 2 s). */
  maxBackoffMs?: number;
  /** Give up when reconnecting has failed for this long (default 60 s); the last error is thrown. */
  giveUpAfterMs?: number;
}

/** One committed change to a record. */
export interface Change<R> {
  op: ChangeOpName;
  type: string;
  /** The record holding only its primary-key fields. */
  key: R | undefined;
  /** The record after the change (undefined for a remove). */
  record: R | undefined;
  /** The record before the change, for updates and removes of a watch with oldRecords. */
  oldRecord: R | undefined;
  position: Position;
  oldRecordOmitted: boolean;
  recordOmitted: boolean;
  /** Set on a remove of a record whose ttl expiry had passed: the reaper's, or the one just before an insert or upsert of its key. */
  expired: boolean;
}

export class Watch<R> implements AsyncIterable<Change<R>> {
  private readonly client: Client;
  private readonly types: readonly RecordType[];
  private readonly options: WatchOptions;
  private readonly descs = new Map<string, DescMessage>();
  private abort: AbortController | undefined;
  private closed = false;
  private started = false;
  /** Where a new watch resumes to get every change not yet delivered, once; undefined before the first. */
  position: Position | undefined;
  /** How many times the watch reconnected. */
  reconnects = 0;

  constructor(client: Client, types: readonly RecordType[], options: WatchOptions) {
    this.client = client;
    this.types = types;
    this.options = options;
    for (const t of types) {
      if (typeof t !== "string") this.descs.set(t.typeName, t);
    }
    if (options.start !== undefined) {
      watchStart(options.start); // refuse a malformed start now rather than at the first read
    }
  }

  /** Stop the watch: iteration ends. */
  close(): void {
    this.closed = true;
    this.abort?.abort();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Change<R>> {
    if (this.started) {
      throw new ProtobaseError(undefined, "a watch is iterated once; start another after watch.position");
    }
    this.started = true;
    const schema = await this.client.schemaFor(this.types);
    const o = this.options;
    const initial = o.initialBackoffMs ?? 50;
    let delay = initial;
    let failingSince: number | undefined;
    try {
      while (!this.closed) {
        const start = this.position ? watchStart(this.position) : watchStart(o.start ?? "now");
        const req = create(WatchRequestSchema, {
          types: this.types.map(typeName),
          filter: o.filter ?? "",
          where: o.where,
          start,
          oldRecords: o.oldRecords ?? false,
          batchSize: o.batchSize ?? 0,
        });
        this.abort = new AbortController();
        let err: ProtobaseError;
        try {
          for await (const resp of this.client.api.watch(req, { signal: this.abort.signal })) {
            failingSince = undefined;
            delay = initial;
            for (const ch of resp.changes) {
              const c = this.change(ch, schema);
              this.position = c.position;
              yield c;
            }
            if (resp.progress && (!this.position || Position.fromProto(resp.progress).compare(this.position) > 0)) {
              this.position = Position.fromProto(resp.progress);
            }
          }
          err = new ProtobaseError(Code.Unavailable, "the watch stream ended");
        } catch (e) {
          err = fromCall(e);
        }
        if (this.closed) {
          return;
        }
        if (!(o.resume ?? true) || !resumable(err)) {
          throw err;
        }
        const now = Date.now();
        failingSince ??= now;
        if (now - failingSince > (o.giveUpAfterMs ?? 60_000)) {
          throw err;
        }
        await sleep(delay / 2 + Math.random() * (delay / 2));
        delay = Math.min(delay * 2, o.maxBackoffMs ?? 2000);
        this.reconnects++;
      }
    } finally {
      this.abort?.abort();
    }
  }

  private decode(any: Any | undefined, schema: Schema | undefined): R | undefined {
    if (!any) return undefined;
    const desc = this.descs.get(typeNameOf(any.typeUrl));
    if (desc) return unpackMessage(desc, any) as R;
    if (!schema) {
      throw new ProtobaseError(undefined, `a change of type ${typeNameOf(any.typeUrl)} the watch did not ask for`);
    }
    return schema.decodeJson(any) as R;
  }

  private change(ch: import("./gen/protobase/v1/protobase_pb.js").Change, schema: Schema | undefined): Change<R> {
    if (!ch.position) {
      throw new ProtobaseError(undefined, "the server sent a change without its position");
    }
    return {
      op: opNames[ch.op] ?? "update",
      type: ch.type,
      key: this.decode(ch.key, schema),
      record: this.decode(ch.record, schema),
      oldRecord: this.decode(ch.oldRecord, schema),
      position: Position.fromProto(ch.position),
      oldRecordOmitted: ch.oldRecordOmitted,
      recordOmitted: ch.recordOmitted,
      expired: ch.expired,
    };
  }
}

// A failure a reconnect can cure: the server is away or the connection
// broke under the stream (errors.ts maps both to UNAVAILABLE).
function resumable(err: ProtobaseError): boolean {
  return err.code === Code.Unavailable;
}

function watchStart(s: WatchStartAt): WatchStart {
  if (s === "now") return create(WatchStartSchema, { start: { case: "now", value: true } });
  if (s === "oldest") return create(WatchStartSchema, { start: { case: "oldest", value: true } });
  let p: Position;
  if (s instanceof Position) p = s;
  else if (typeof s === "bigint") p = new Position(s);
  else if (typeof s === "string") p = Position.parse(s);
  else throw new TypeError(`a watch start is "now", "oldest", a Position, a commit or "C.I", not ${String(s)}`);
  return create(WatchStartSchema, { start: { case: "after", value: p.toProto() } });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
