// Writer: records packed into batches on one Write stream. Each batch asks
// for an acknowledgement, which the server sends once the batch (and every
// one before it) is durable; a few batches are in flight at once.
//
// The writer encodes a batch's records itself, each as the bytes of a
// WriteStreamRequest.records entry (an Any: the type URL's bytes, cached
// per type, then the record's), into one buffer that goes out as the
// request's raw bytes: protobuf-es would otherwise build an Any message per
// record and copy each through its writer again, which costs more than
// encoding the record.

import { create, toBinary, type DescMessage, type JsonValue, type MessageShape } from "@bufbuild/protobuf";
import { WireType } from "@bufbuild/protobuf/wire";
import { WriteOp as WriteOpEnum, WriteStreamRequestSchema, type WriteStreamRequest } from "./gen/protobase/v1/protobase_pb.js";
import type { Client } from "./client.js";
import { fromCall, ProtobaseError, ResourceExhausted } from "./errors.js";
import { Queue } from "./queue.js";
import { TYPE_URL_PREFIX, type Schema } from "./records.js";
import { Code } from "@connectrpc/connect";

export type WriteOp = "insert" | "update" | "upsert" | "remove";

const ops: Record<WriteOp, WriteOpEnum> = {
  insert: WriteOpEnum.INSERT,
  update: WriteOpEnum.UPDATE,
  upsert: WriteOpEnum.UPSERT,
  remove: WriteOpEnum.REMOVE,
};

export interface WriterOptions {
  /** Records per batch (default 1,000; at most the server's max_batch_records). */
  batchSize?: number;
  /** Batches sent and not yet acknowledged before write waits (default 4). */
  maxInFlight?: number;
}

/** What a writer's stream applied: every record counted is durable. */
export interface WriteResult {
  batches: number;
  records: number;
  /** The commit position of the last acknowledged batch (a watch can start after it). */
  position: bigint;
}

// Bytes a request adds around its records: the op, ack and field headers.
const REQUEST_OVERHEAD = 16;

// WriteStreamRequest.records.
const RECORDS_FIELD = 2;

function varintSize(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

// putVarint writes n at o and returns the offset after it.
function putVarint(b: Uint8Array, o: number, n: number): number {
  while (n >= 0x80) {
    b[o++] = (n & 0x7f) | 0x80;
    n = Math.floor(n / 128);
  }
  b[o++] = n;
  return o;
}

export class Writer {
  private readonly client: Client;
  private readonly schema: Schema;
  private readonly op: WriteOpEnum;
  private readonly batchSize: number;
  private readonly maxInFlight: number;
  private readonly maxBytes: number;
  private readonly requests = new Queue<WriteStreamRequest>();
  private readonly ended: Promise<void>;
  private batch = new Uint8Array(64 << 10);
  private batchLen = 0;
  private batchRecords = 0;
  private readonly prefixes = new Map<string, Uint8Array>();
  private sent = 0;
  private acked = 0;
  private ackedRecords = 0;
  private position = 0n;
  private error: ProtobaseError | undefined;
  private closed = false;
  private waiters: Array<() => void> = [];

  constructor(client: Client, op: WriteOp, schema: Schema, options: WriterOptions = {}) {
    const o = ops[op];
    if (o === undefined) {
      throw new ProtobaseError(undefined, `unknown write operation ${JSON.stringify(op)}; want insert, update, upsert or remove`);
    }
    const limits = schema.response.writeLimits;
    const maxRecords = limits ? Number(limits.maxBatchRecords) : 10_000;
    const batchSize = options.batchSize ?? Math.min(1000, maxRecords);
    if (!Number.isInteger(batchSize) || batchSize <= 0) {
      throw new ProtobaseError(undefined, `batchSize must be a positive integer, not ${batchSize}`);
    }
    if (batchSize > maxRecords) {
      throw new ProtobaseError(undefined, `batchSize ${batchSize} is over the server's limit of ${maxRecords} records per batch`);
    }
    this.client = client;
    this.schema = schema;
    this.op = o;
    this.batchSize = batchSize;
    this.maxInFlight = Math.max(1, options.maxInFlight ?? 4);
    this.maxBytes = limits ? Number(limits.maxMessageBytes) : 64 << 20;
    this.ended = this.receive();
  }

  /**
   * Add one record: a message of a generated schema, or JSON (protobuf's
   * JSON mapping) of a type the server's schema names. Resolves at once,
   * unless `maxInFlight` batches await their acknowledgement; rejects with
   * the stream's first failure, naming the batch, record, type and field.
   */
  write<Desc extends DescMessage>(type: Desc, record: MessageShape<Desc>): Promise<void>;
  write(type: string, record: JsonValue): Promise<void>;
  write(type: string | DescMessage, record: unknown): Promise<void> {
    try {
      this.check();
    } catch (e) {
      return Promise.reject(e);
    }
    let name: string;
    let value: Uint8Array;
    if (typeof type === "string") {
      name = type;
      try {
        value = this.schema.encodeJson(type, record as JsonValue);
      } catch (e) {
        const err = e as ProtobaseError;
        return Promise.reject(
          new ProtobaseError(undefined, err.rawMessage ?? String(e), {
            batch: this.sent,
            record: this.batchRecords,
            type,
            reason: err.reason,
            batchesApplied: this.acked,
            recordsApplied: this.ackedRecords,
          }),
        );
      }
    } else {
      name = type.typeName;
      value = toBinary(type, record as MessageShape<DescMessage>);
    }
    const prefix = this.prefixes.get(name) ?? this.prefix(name);
    const inner = prefix.length + varintSize(value.length) + value.length;
    const size = 1 + varintSize(inner) + inner;
    if (REQUEST_OVERHEAD + size > this.maxBytes) {
      return Promise.reject(
        new ResourceExhausted(
          Code.ResourceExhausted,
          `a record of ${size} bytes is over the server's limit of ${this.maxBytes} bytes per request; nothing of it was sent`,
          { type: name, batchesApplied: this.acked, recordsApplied: this.ackedRecords },
        ),
      );
    }
    if (this.batchLen + size + REQUEST_OVERHEAD > this.maxBytes) {
      this.send();
    }
    this.append(size, inner, prefix, value);
    if (this.batchRecords >= this.batchSize) {
      this.send();
      if (this.sent - this.acked >= this.maxInFlight) {
        return this.until(() => this.sent - this.acked < this.maxInFlight);
      }
    }
    return Promise.resolve();
  }

  /** Send what is batched and wait until everything sent is durable. */
  async flush(): Promise<WriteResult> {
    this.check();
    if (this.batchRecords > 0) {
      this.send();
    }
    await this.until(() => this.acked >= this.sent);
    return this.result();
  }

  /** Flush, then end the stream; the writer takes no more records. */
  async close(): Promise<WriteResult> {
    if (this.closed) {
      if (this.error) throw this.error;
      return this.result();
    }
    await this.flush();
    this.closed = true;
    this.requests.end();
    await this.ended;
    if (this.error) throw this.error;
    return this.result();
  }

  /** Cancel the stream: records not yet acknowledged may or may not be applied. */
  cancel(): void {
    this.closed = true;
    this.fail(new ProtobaseError(Code.Canceled, "the writer was cancelled", this.applied()));
    this.requests.end();
  }

  private result(): WriteResult {
    return { batches: this.acked, records: this.ackedRecords, position: this.position };
  }

  private applied(): { batchesApplied: number; recordsApplied: number } {
    return { batchesApplied: this.acked, recordsApplied: this.ackedRecords };
  }

  private check(): void {
    if (this.error) {
      throw this.error;
    }
    if (this.closed) {
      throw new ProtobaseError(undefined, "the writer is closed", this.applied());
    }
  }

  // send queues the batch as one request: its records' bytes ride in one
  // unknown field 2 (records), whose tag protobuf-es writes before them;
  // each later record carries its own tag, so the request's bytes are what
  // a repeated records field of these Anys encodes to.
  private send(): void {
    const data = this.batch.slice(1, this.batchLen);
    const req = create(WriteStreamRequestSchema, { op: this.op, ack: true });
    req.$unknown = [{ no: RECORDS_FIELD, wireType: WireType.LengthDelimited, data }];
    this.requests.push(req);
    this.sent++;
    this.batchLen = 0;
    this.batchRecords = 0;
  }

  // prefix is the bytes of Any.type_url for a type, and Any.value's tag.
  private prefix(name: string): Uint8Array {
    const url = new TextEncoder().encode(TYPE_URL_PREFIX + name);
    const p = new Uint8Array(1 + varintSize(url.length) + url.length + 1);
    p[0] = 0x0a;
    let o = putVarint(p, 1, url.length);
    p.set(url, o);
    o += url.length;
    p[o] = 0x12;
    this.prefixes.set(name, p);
    return p;
  }

  private append(size: number, inner: number, prefix: Uint8Array, value: Uint8Array): void {
    if (this.batchLen + size > this.batch.length) {
      const grown = new Uint8Array(Math.max(this.batch.length * 2, this.batchLen + size));
      grown.set(this.batch.subarray(0, this.batchLen));
      this.batch = grown;
    }
    const b = this.batch;
    b[this.batchLen] = (RECORDS_FIELD << 3) | WireType.LengthDelimited;
    let o = putVarint(b, this.batchLen + 1, inner);
    b.set(prefix, o);
    o = putVarint(b, o + prefix.length, value.length);
    b.set(value, o);
    this.batchLen = o + value.length;
    this.batchRecords++;
  }

  private until(cond: () => boolean): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const test = (): void => {
        if (this.error) {
          reject(this.error);
        } else if (cond()) {
          resolve();
        } else {
          this.waiters.push(test);
        }
      };
      test();
    });
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  private fail(err: ProtobaseError): void {
    if (!this.error) {
      this.error = err;
    }
    this.wake();
  }

  private async receive(): Promise<void> {
    try {
      for await (const resp of this.client.api.write(this.requests)) {
        this.acked = Number(resp.batch) + 1;
        this.ackedRecords = Number(resp.records);
        this.position = resp.position;
        this.wake();
      }
      if (this.acked < this.sent) {
        this.fail(
          new ProtobaseError(Code.Unknown, "write stream ended before every batch was acknowledged", this.applied()),
        );
      }
    } catch (e) {
      this.fail(fromCall(e, { batches: this.acked, records: this.ackedRecords }));
      this.requests.end();
    }
  }
}
