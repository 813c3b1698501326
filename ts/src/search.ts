// Searcher: many queries in flight on one Search stream. A query's id is
// its ordinal on the stream; results, completions and errors come keyed by
// it, in whatever order the server finishes them.

import { create, fromBinary } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import {
  GetSchemaRequestSchema,
  PlanSchema,
  QueryErrorSchema,
  SearchRequestSchema,
  type Plan,
  type SearchRequest,
} from "./gen/protobase/v1/protobase_pb.js";
import { Protobase } from "./gen/protobase/v1/service_pb.js";
import type { Client, QueryOptions } from "./client.js";
import { errorOf, fromCall, ProtobaseError } from "./errors.js";
import { Queue } from "./queue.js";
import { encodeQuery, repeatedField } from "./query_encode.js";
import { typeName, type AnyLike, type RecordOf, type RecordType } from "./records.js";

/** One query of a search: its record type and what it asks. */
export interface QuerySpec extends QueryOptions {
  type: RecordType;
}

/** What one query of a search answered. */
export interface SearchResult<R> {
  records: R[];
  /** The matches (for a count query, the only answer). */
  count: bigint;
  plan?: Plan;
  versions: bigint[];
  /** Set by Client.search on a query that failed alone. */
  error?: ProtobaseError;
}

interface Pending {
  decode: (a: AnyLike) => unknown;
  records: unknown[];
  versions: bigint[];
  plan?: Plan;
  resolve: (r: SearchResult<unknown>) => void;
  reject: (e: ProtobaseError) => void;
}

// The Search method with its responses read as a message of no fields:
// every field of a SearchResponse lands in its unknown fields, which take
// reads in place, and take() walks them (SearchResponse: results = 1,
// done = 2, errors = 3). protobuf-es's reflective decoder of whole
// responses costs the client more per lookup than the server's answer.
const rawSearch = { ...Protobase.method.search, output: GetSchemaRequestSchema };

// request is a SearchRequest of encoded queries (SearchRequest.queries is
// field 1), so that a query is encoded once, by encodeQuery.
function request(queries: readonly Uint8Array[]): SearchRequest {
  const req = create(SearchRequestSchema);
  req.$unknown = [repeatedField(1, queries)];
  return req;
}

export class Searcher {
  private readonly client: Client;
  private readonly requests = new Queue<SearchRequest>();
  private readonly pending = new Map<number, Pending>();
  private next = 0;
  // Queries of find not yet sent: the ones a program starts together (in
  // one turn of the event loop) go in one request.
  private queued: Uint8Array[] = [];
  private failure: ProtobaseError | undefined;
  private closed = false;
  private readonly done: Promise<void>;

  constructor(client: Client) {
    this.client = client;
    this.done = this.receive();
  }

  /** Run one query; resolves with its records, or rejects with the error the server gave that query alone. */
  async find<T extends RecordType>(type: T, options: QueryOptions = {}): Promise<SearchResult<RecordOf<T>>> {
    const decode = await this.client.decoder(type);
    const query = encodeQuery(typeName(type), options);
    if (this.failure) {
      throw this.failure;
    }
    if (this.closed) {
      throw new ProtobaseError(undefined, "the searcher is closed");
    }
    const id = this.next++;
    const result = new Promise<SearchResult<unknown>>((resolve, reject) => {
      this.pending.set(id, { decode, records: [], versions: [], resolve, reject });
    });
    this.queued.push(query);
    if (this.queued.length === 1) {
      setImmediate(() => this.sendQueued());
    }
    return result as Promise<SearchResult<RecordOf<T>>>;
  }

  /**
   * Run many queries sent in one request on the stream; resolves with
   * their results in order, or rejects with the first query's error.
   */
  async findAll(queries: readonly QuerySpec[]): Promise<SearchResult<unknown>[]> {
    const decoders = await Promise.all(queries.map((q) => this.client.decoder(q.type)));
    const built = queries.map((q) => encodeQuery(typeName(q.type), q));
    if (this.failure) {
      throw this.failure;
    }
    if (this.closed) {
      throw new ProtobaseError(undefined, "the searcher is closed");
    }
    const results = decoders.map(
      (decode) =>
        new Promise<SearchResult<unknown>>((resolve, reject) => {
          this.pending.set(this.next++, { decode, records: [], versions: [], resolve, reject });
        }),
    );
    this.sendQueued(); // the ids are in order on the stream
    this.requests.push(request(built));
    return Promise.all(results);
  }

  private sendQueued(): void {
    if (this.queued.length > 0) {
      this.requests.push(request(this.queued));
      this.queued = [];
    }
  }

  /** End the stream once the queries in flight are answered. */
  close(): void {
    this.closed = true;
    if (this.pending.size === 0) {
      this.requests.end();
    }
  }

  private async receive(): Promise<void> {
    try {
      const resp = await this.client.transport.stream(rawSearch, undefined, undefined, undefined, this.requests);
      for await (const msg of resp.message) {
        for (const f of msg.$unknown ?? []) {
          if (f.wireType !== WireType.LengthDelimited) continue;
          const body = new BinaryReader(f.data).bytes();
          if (f.no === 1) this.takeResults(body);
          else if (f.no === 2) this.takeDone(body);
          else if (f.no === 3) this.takeError(body);
        }
        if (this.closed && this.pending.size === 0) {
          this.requests.end();
        }
      }
      if (this.pending.size > 0) {
        this.fail(new ProtobaseError(undefined, "the search stream ended with queries unanswered"));
      }
    } catch (e) {
      this.fail(fromCall(e));
    }
  }

  // takeResults reads a ResultBatch: query = 1, records = 2 (Any: type_url
  // = 1, value = 2), plan = 3, versions = 4.
  private takeResults(body: Uint8Array): void {
    const r = new BinaryReader(body);
    let id = 0; // proto3 leaves out a query id of 0
    const records: AnyLike[] = [];
    const versions: bigint[] = [];
    let plan: Plan | undefined;
    while (r.pos < r.len) {
      const [no, wt] = r.tag();
      if (no === 1 && wt === WireType.Varint) {
        id = Number(r.uint64());
      } else if (no === 2 && wt === WireType.LengthDelimited) {
        records.push(readAny(r.bytes()));
      } else if (no === 3 && wt === WireType.LengthDelimited) {
        plan = fromBinary(PlanSchema, r.bytes());
      } else if (no === 4 && wt === WireType.LengthDelimited) {
        const packed = new BinaryReader(r.bytes());
        while (packed.pos < packed.len) versions.push(BigInt(packed.uint64()));
      } else if (no === 4 && wt === WireType.Varint) {
        versions.push(BigInt(r.uint64()));
      } else {
        r.skip(wt);
      }
    }
    const p = this.pending.get(id);
    if (!p) return;
    for (const a of records) p.records.push(p.decode(a));
    for (const v of versions) p.versions.push(v);
    if (plan) p.plan = plan;
  }

  // takeDone reads a QueryDone: query = 1, count = 2, plan = 3.
  private takeDone(body: Uint8Array): void {
    const r = new BinaryReader(body);
    let id = 0;
    let count = 0n;
    let plan: Plan | undefined;
    while (r.pos < r.len) {
      const [no, wt] = r.tag();
      if (no === 1 && wt === WireType.Varint) id = Number(r.uint64());
      else if (no === 2 && wt === WireType.Varint) count = BigInt(r.uint64());
      else if (no === 3 && wt === WireType.LengthDelimited) plan = fromBinary(PlanSchema, r.bytes());
      else r.skip(wt);
    }
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    p.resolve({ records: p.records, count, plan: plan ?? p.plan, versions: p.versions });
  }

  private takeError(body: Uint8Array): void {
    const e = fromBinary(QueryErrorSchema, body);
    const id = Number(e.query);
    const p = this.pending.get(id);
    if (!p) return;
    this.pending.delete(id);
    p.reject(errorOf(e.code, e.message, { query: id, field: e.field || undefined }));
  }

  private fail(err: ProtobaseError): void {
    this.failure = err;
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    this.requests.end();
  }

  /** Resolves when the stream has ended. */
  async wait(): Promise<void> {
    await this.done;
  }
}

// readAny reads a google.protobuf.Any: type_url = 1, value = 2.
function readAny(body: Uint8Array): AnyLike {
  const r = new BinaryReader(body);
  let typeUrl = "";
  let value: Uint8Array = new Uint8Array(0);
  while (r.pos < r.len) {
    const [no, wt] = r.tag();
    if (no === 1 && wt === WireType.LengthDelimited) typeUrl = r.string();
    else if (no === 2 && wt === WireType.LengthDelimited) value = r.bytes();
    else r.skip(wt);
  }
  return { typeUrl, value };
}
