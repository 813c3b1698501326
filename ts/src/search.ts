// Searcher: many queries in flight on one Search stream. A query's id is
// its ordinal on the stream; results, completions and errors come keyed by
// it, in whatever order the server finishes them.

import { create } from "@bufbuild/protobuf";
import type { Any } from "@bufbuild/protobuf/wkt";
import { SearchRequestSchema, type Plan, type SearchRequest, type SearchResponse } from "./gen/protobase/v1/protobase_pb.js";
import type { Client, QueryOptions } from "./client.js";
import { buildQuery } from "./client.js";
import { errorOf, fromCall, ProtobaseError } from "./errors.js";
import { Queue } from "./queue.js";
import { typeName, type RecordOf, type RecordType } from "./records.js";

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
  decode: (a: Any) => unknown;
  records: unknown[];
  versions: bigint[];
  plan?: Plan;
  resolve: (r: SearchResult<unknown>) => void;
  reject: (e: ProtobaseError) => void;
}

export class Searcher {
  private readonly client: Client;
  private readonly requests = new Queue<SearchRequest>();
  private readonly pending = new Map<number, Pending>();
  private next = 0;
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
    const query = buildQuery(typeName(type), options);
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
    this.requests.push(create(SearchRequestSchema, { queries: [query] }));
    return result as Promise<SearchResult<RecordOf<T>>>;
  }

  /**
   * Run many queries sent in one request on the stream; resolves with
   * their results in order, or rejects with the first query's error.
   */
  async findAll(queries: readonly QuerySpec[]): Promise<SearchResult<unknown>[]> {
    const decoders = await Promise.all(queries.map((q) => this.client.decoder(q.type)));
    const built = queries.map((q) => buildQuery(typeName(q.type), q));
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
    this.requests.push(create(SearchRequestSchema, { queries: built }));
    return Promise.all(results);
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
      for await (const resp of this.client.api.search(this.requests)) {
        this.take(resp);
      }
      if (this.pending.size > 0) {
        this.fail(new ProtobaseError(undefined, "the search stream ended with queries unanswered"));
      }
    } catch (e) {
      this.fail(fromCall(e));
    }
  }

  private take(resp: SearchResponse): void {
    for (const b of resp.results) {
      const p = this.pending.get(Number(b.query));
      if (!p) continue;
      for (const r of b.records) p.records.push(p.decode(r));
      p.versions.push(...b.versions);
      if (b.plan) p.plan = b.plan;
    }
    for (const d of resp.done) {
      const id = Number(d.query);
      const p = this.pending.get(id);
      if (!p) continue;
      this.pending.delete(id);
      p.resolve({ records: p.records, count: d.count, plan: d.plan ?? p.plan, versions: p.versions });
    }
    for (const e of resp.errors) {
      const id = Number(e.query);
      const p = this.pending.get(id);
      if (!p) continue;
      this.pending.delete(id);
      p.reject(errorOf(e.code, e.message, { query: id, field: e.field || undefined }));
    }
    if (this.closed && this.pending.size === 0) {
      this.requests.end();
    }
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
