// The Protobase client for Node: connect() and what its calls take and answer.

export { Client, connect, buildQuery } from "./client.js";
export type { ConnectOptions, TLSOptions, QueryOptions, Page, GetResult, KeyRoleName } from "./client.js";
export * from "./errors.js";
export { Position } from "./position.js";
export { Schema, TYPE_URL_PREFIX, packMessage, unpackMessage, typeName, typeNameOf } from "./records.js";
export type { RecordType, RecordOf } from "./records.js";
export { Searcher } from "./search.js";
export type { QuerySpec, SearchResult } from "./search.js";
export { Writer } from "./writer.js";
export type { WriteOp, WriterOptions, WriteResult } from "./writer.js";
export { Watch } from "./watch.js";
export type { Change, ChangeOpName, WatchOptions, WatchStartAt } from "./watch.js";
export * as pb from "./gen/protobase/v1/protobase_pb.js";
export { Protobase as ProtobaseService } from "./gen/protobase/v1/service_pb.js";
