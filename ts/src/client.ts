// Client: one HTTP/2 connection to a Protobase server (gRPC protocol), its
// API key and TLS, and the calls of the service.

import { create, fromJson, type DescMessage, type JsonValue, type MessageInitShape } from "@bufbuild/protobuf";
import { ValueSchema, type Any } from "@bufbuild/protobuf/wkt";
import { createClient, type Client as RpcClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createGrpcTransport, Http2SessionManager } from "@connectrpc/connect-node";
import { readFileSync } from "node:fs";
import { Protobase } from "./gen/protobase/v1/service_pb.js";
import {
  ApplySchemaRequestSchema,
  CreateKeyRequestSchema,
  GetRequestSchema,
  KeyRole,
  QueryRequestSchema,
  QuerySchema,
  ScanRequestSchema,
  SchemaMode,
  type ApplySchemaResponse,
  type ExprSchema,
  type GetSchemaResponse,
  type KeyInfo,
  type Plan,
  type Query,
} from "./gen/protobase/v1/protobase_pb.js";
import { fromCall, ProtobaseError } from "./errors.js";
import { packMessage, Schema, typeName, unpackMessage, type AnyLike, type RecordOf, type RecordType } from "./records.js";
import { Searcher, type SearchResult, type QuerySpec } from "./search.js";
import { Writer, type WriteOp, type WriterOptions } from "./writer.js";
import { Watch, type WatchOptions } from "./watch.js";

/** TLS settings: the CA that signs the server's certificate, and a client certificate for mutual TLS. */
export interface TLSOptions {
  /** PEM text or a path to a PEM file; the system's roots when absent. */
  ca?: string | Buffer;
  /** The client's certificate (PEM text or path), for servers that ask for one. */
  cert?: string | Buffer;
  /** The client certificate's private key (PEM text or path). */
  key?: string | Buffer;
  /** The name to check the server's certificate against, when not the address's host. */
  serverName?: string;
}

export interface ConnectOptions {
  /** Sent as "authorization: Bearer KEY" on every call; default $PROTOBASE_API_KEY. */
  apiKey?: string;
  /** true for TLS with the system's roots, or the settings of TLSOptions. */
  tls?: boolean | TLSOptions;
}

/** What a query may say beside its type (see Query in protobase.proto). */
export interface QueryOptions {
  /** A filter in the text syntax (docs/queries.md); the server parses it. */
  filter?: string;
  /** A filter as an expression tree; a query has a filter or a where, not both. */
  where?: MessageInitShape<typeof ExprSchema>;
  limit?: number | bigint;
  order?: { index: string; descending?: boolean };
  keysOnly?: boolean;
  count?: boolean;
  explain?: boolean;
  versions?: boolean;
}

/** One page of a query. */
export interface Page<R> {
  records: R[];
  /** The token of the next page; "" on the last. */
  nextPageToken: string;
  count: bigint;
  plan?: Plan;
  versions: bigint[];
}

/** What a Get found: the records in key order, and the keys with none. */
export interface GetResult<R> {
  records: R[];
  /** The positions (in the keys given) of the keys without a record. */
  missing: number[];
  versions: bigint[];
}

export type KeyRoleName = "read" | "write" | "schema" | "admin";

const roles: Record<KeyRoleName, KeyRole> = {
  read: KeyRole.READ,
  write: KeyRole.WRITE,
  schema: KeyRole.SCHEMA,
  admin: KeyRole.ADMIN,
};

/** Open a client of the server at `address` (host:port, or an http:// or https:// URL). */
export function connect(address: string, options: ConnectOptions = {}): Client {
  return new Client(address, options);
}

export class Client {
  /** The generated service client, for calls this class does not wrap. */
  readonly api: RpcClient<typeof Protobase>;
  /** The transport under `api`, with the API key's interceptor. */
  readonly transport: Transport;
  readonly address: string;
  private readonly sessions: Http2SessionManager;
  private schemaCache: Promise<Schema> | undefined;

  constructor(address: string, options: ConnectOptions = {}) {
    const tls = options.tls ?? address.startsWith("https://");
    const hostPort = address.replace(/^https?:\/\//, "").replace(/\/+$/, "");
    const baseUrl = `${tls ? "https" : "http"}://${hostPort}`;
    const apiKey = options.apiKey ?? process.env["PROTOBASE_API_KEY"] ?? "";
    if (!/^(\[[0-9a-fA-F:.]+\]|[^:/\s[\]]+):[0-9]{1,5}$/.test(hostPort)) {
      throw new ProtobaseError(undefined, `an address is host:port (or http:// or https:// and host:port), not ${JSON.stringify(address)}`);
    }
    const url = new URL(baseUrl);
    if (apiKey && !tls && !isLoopback(url.hostname)) {
      throw new ProtobaseError(
        undefined,
        "refusing to send the API key over a plaintext connection to a non-loopback address; use TLS",
      );
    }
    const nodeOptions = typeof tls === "object" ? tlsNodeOptions(tls) : {};
    this.address = hostPort;
    this.sessions = new Http2SessionManager(baseUrl, { pingIntervalMs: 30_000 }, nodeOptions);
    const interceptors: Interceptor[] = [];
    if (apiKey) {
      const header = `Bearer ${apiKey}`;
      interceptors.push((next) => (req) => {
        req.header.set("authorization", header);
        return next(req);
      });
    }
    this.transport = createGrpcTransport({
      baseUrl,
      sessionManager: this.sessions,
      interceptors,
    });
    this.api = createClient(Protobase, this.transport);
  }

  /** Close the connection; calls in flight fail. */
  close(): void {
    this.sessions.abort();
  }

  /**
   * Apply schema files (import path to text). Without `add` they are the
   * whole schema the server is to hold; with it, files to add or replace
   * beside the ones it holds.
   */
  async applySchema(
    files: Record<string, string>,
    options: { add?: boolean; dryRun?: boolean; allowDrop?: string[]; removeFiles?: string[] } = {},
  ): Promise<ApplySchemaResponse> {
    const req = create(ApplySchemaRequestSchema, {
      files,
      dryRun: options.dryRun ?? false,
      allowDrop: options.allowDrop ?? [],
      removeFiles: options.removeFiles ?? [],
      mode: options.add ? SchemaMode.ADD : SchemaMode.WHOLE,
    });
    try {
      return await this.api.applySchema(req);
    } catch (e) {
      throw fromCall(e);
    } finally {
      this.schemaCache = undefined;
    }
  }

  /** The server's schema as GetSchema answers it. */
  async getSchema(): Promise<GetSchemaResponse> {
    try {
      return await this.api.getSchema({});
    } catch (e) {
      throw fromCall(e);
    }
  }

  /**
   * The server's schema, with the descriptors that convert JSON records;
   * fetched once and again after applySchema or with `refresh`.
   */
  async schema(refresh = false): Promise<Schema> {
    if (refresh || !this.schemaCache) {
      const p = this.getSchema().then((r) => new Schema(r));
      this.schemaCache = p;
      p.catch(() => {
        if (this.schemaCache === p) this.schemaCache = undefined;
      });
    }
    return this.schemaCache;
  }

  /** The schema that converts records of these types; fetched again once if it lacks one. */
  async schemaFor(types: readonly RecordType[]): Promise<Schema | undefined> {
    const names = types.filter((t): t is string => typeof t === "string");
    if (names.length === 0) {
      return undefined;
    }
    let s = await this.schema();
    if (names.some((n) => !s.message(n))) {
      s = await this.schema(true);
      for (const n of names) s.need(n);
    }
    return s;
  }

  /** A decoder of records of a type: its messages for a schema, JSON for a name. */
  async decoder<T extends RecordType>(type: T): Promise<(any: AnyLike) => RecordOf<T>> {
    if (typeof type !== "string") {
      const desc = type as DescMessage;
      return (any) => unpackMessage(desc, any) as RecordOf<T>;
    }
    const s = (await this.schemaFor([type])) as Schema;
    return (any) => s.decodeJson(any) as RecordOf<T>;
  }

  /**
   * An auto-batching writer on one Write stream: records go in batches of
   * `batchSize` (default 1,000), several batches in flight. It converts
   * JSON records with the schema the server holds when it starts (fetched
   * anew, so that types another client just applied are known).
   */
  async writer(op: WriteOp, options: WriterOptions = {}): Promise<Writer> {
    const s = await this.schema(true);
    return new Writer(this, op, s, options);
  }

  /** A stream for many searches in flight at once: each `find` is one query on it. */
  searcher(): Searcher {
    return new Searcher(this);
  }

  /**
   * Run queries on one Search stream, all in flight together; the results
   * are in the order of the queries, a failed query's with its `error`.
   */
  async search(queries: QuerySpec[]): Promise<SearchResult<unknown>[]> {
    const s = this.searcher();
    try {
      const settled = await Promise.allSettled(queries.map((q) => s.find(q.type, q)));
      return settled.map((r) =>
        r.status === "fulfilled" ? r.value : { records: [], count: 0n, versions: [], error: fromCall(r.reason) },
      );
    } finally {
      s.close();
    }
  }

  /** Every record a query matches, streamed (Scan). */
  async *scan<T extends RecordType>(
    type: T,
    options: QueryOptions & { parallelism?: number; batchSize?: number } = {},
  ): AsyncGenerator<RecordOf<T>> {
    const decode = await this.decoder(type);
    const req = create(ScanRequestSchema, {
      query: buildQuery(typeName(type), options),
      parallelism: options.parallelism ?? 0,
      batchSize: options.batchSize ?? 0,
    });
    try {
      for await (const resp of this.api.scan(req)) {
        for (const r of resp.records) {
          yield decode(r);
        }
      }
    } catch (e) {
      throw fromCall(e);
    }
  }

  /** One page of a query (Query); pass its nextPageToken as `pageToken` for the next. */
  async query<T extends RecordType>(
    type: T,
    options: QueryOptions & { pageSize?: number; pageToken?: string } = {},
  ): Promise<Page<RecordOf<T>>> {
    const decode = await this.decoder(type);
    const req = create(QueryRequestSchema, {
      query: buildQuery(typeName(type), options),
      pageSize: options.pageSize ?? 0,
      pageToken: options.pageToken ?? "",
    });
    try {
      const resp = await this.api.query(req);
      return {
        records: resp.records.map(decode),
        nextPageToken: resp.nextPageToken,
        count: resp.count,
        plan: resp.plan,
        versions: resp.versions,
      };
    } catch (e) {
      throw fromCall(e);
    }
  }

  /** Every page of a query, in order. */
  async *pages<T extends RecordType>(
    type: T,
    options: QueryOptions & { pageSize?: number } = {},
  ): AsyncGenerator<Page<RecordOf<T>>> {
    let pageToken = "";
    do {
      const page = await this.query(type, { ...options, pageToken });
      yield page;
      pageToken = page.nextPageToken;
    } while (pageToken !== "");
  }

  /**
   * The records of these primary keys (JSON values: 7, "ann", [7, "a"] in
   * primary-key order; 64-bit integers as bigint or strings), in key order.
   */
  async get<T extends RecordType>(
    type: T,
    keys: ReadonlyArray<JsonValue | bigint>,
    options: { versions?: boolean } = {},
  ): Promise<GetResult<RecordOf<T>>> {
    const decode = await this.decoder(type);
    const req = create(GetRequestSchema, {
      type: typeName(type),
      keys: keys.map((k) => fromJson(ValueSchema, toJsonKey(k))),
      versions: options.versions ?? false,
    });
    try {
      const resp = await this.api.get(req);
      return { records: resp.records.map(decode), missing: resp.missing, versions: resp.versions };
    } catch (e) {
      throw fromCall(e);
    }
  }

  /**
   * Watch the changes to records of these types, in commit order; the
   * watch resumes on its own after a transport failure (see WatchOptions).
   */
  watch<T extends RecordType>(types: readonly T[], options: WatchOptions = {}): Watch<RecordOf<T>> {
    return new Watch<RecordOf<T>>(this, types, options);
  }

  /** Create an API key (admin key required); the answer holds the key, which the server cannot show again. */
  async createKey(name: string, role: KeyRoleName, types: string[] = []): Promise<{ key: string; info: KeyInfo }> {
    const r = roles[role];
    if (r === undefined) {
      throw new ProtobaseError(undefined, `unknown key role ${JSON.stringify(role)}; want one of read, write, schema, admin`);
    }
    try {
      const resp = await this.api.createKey(create(CreateKeyRequestSchema, { name, role: r, types }));
      if (!resp.info) {
        throw new ProtobaseError(undefined, "the server answered a created key without its info");
      }
      return { key: resp.key, info: resp.info };
    } catch (e) {
      throw fromCall(e);
    }
  }

  /** The API keys, without the keys themselves (admin key required). */
  async listKeys(): Promise<KeyInfo[]> {
    try {
      return (await this.api.listKeys({})).keys;
    } catch (e) {
      throw fromCall(e);
    }
  }

  /** Revoke the API key of this name (admin key required). */
  async revokeKey(name: string): Promise<void> {
    try {
      await this.api.revokeKey({ name });
    } catch (e) {
      throw fromCall(e);
    }
  }

  /** Pack a record as an Any: a message of a schema, or JSON of a named type. */
  async pack<T extends RecordType>(type: T, record: RecordOf<T>): Promise<Any> {
    if (typeof type !== "string") {
      return packMessage(type as DescMessage, record as never);
    }
    const s = (await this.schemaFor([type])) as Schema;
    return s.packJson(type, record as JsonValue);
  }
}

/** Build a protobase.v1.Query. */
export function buildQuery(type: string, o: QueryOptions): Query {
  if (o.filter && o.where) {
    throw new ProtobaseError(undefined, "a query has a filter or a where, not both", { field: "filter" });
  }
  return create(QuerySchema, {
    type,
    filter: o.filter ?? "",
    where: o.where,
    limit: BigInt(o.limit ?? 0),
    order: o.order ? { index: o.order.index, descending: o.order.descending ?? false } : undefined,
    keysOnly: o.keysOnly ?? false,
    count: o.count ?? false,
    explain: o.explain ?? false,
    versions: o.versions ?? false,
  });
}

function toJsonKey(k: JsonValue | bigint): JsonValue {
  if (typeof k === "bigint") {
    return k.toString();
  }
  if (Array.isArray(k)) {
    return k.map((v) => toJsonKey(v as JsonValue | bigint));
  }
  return k;
}

function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "");
  return h === "localhost" || h === "::1" || /^127\./.test(h);
}

function pem(v: string | Buffer): string | Buffer {
  if (typeof v === "string" && !v.includes("-----BEGIN")) {
    return readFileSync(v);
  }
  return v;
}

function tlsNodeOptions(t: TLSOptions): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  if (t.ca) o["ca"] = pem(t.ca);
  if (t.cert) o["cert"] = pem(t.cert);
  if (t.key) o["key"] = pem(t.key);
  if (t.serverName) o["servername"] = t.serverName;
  return o;
}
