// Errors: one class per gRPC status code, all under ProtobaseError, built
// from the server's status and its details (protobase.v1.WriteError for a
// write, google.rpc.BadRequest naming a field, protobase.v1.Position for a
// watch start older than the changes the server keeps).

import { Code, ConnectError } from "@connectrpc/connect";
import { BinaryReader } from "@bufbuild/protobuf/wire";
import { PositionSchema, WriteErrorSchema } from "./gen/protobase/v1/protobase_pb.js";
import { Position } from "./position.js";

/** What the server said about a failed call; every field is optional. */
export interface ErrorDetails {
  /** The ordinal of the failing batch on a write stream. */
  batch?: number;
  /** The index of the failing record within its batch. */
  record?: number;
  /** The failing record's full type name. */
  type?: string;
  /** The field path to blame. */
  field?: string;
  /** The server's words on what is wrong. */
  reason?: string;
  /** Batches durable before the failure (writes). */
  batchesApplied?: number;
  /** Records durable before the failure (writes). */
  recordsApplied?: number;
  /** The index of the batch condition to blame. */
  condition?: number;
  /** The version the failing condition found. */
  version?: bigint;
  /** The query's position in a search's list of queries. */
  query?: number;
  /** For a watch start out of range: the oldest position a watch can start after. */
  oldest?: Position;
}

/**
 * A failed call. `code` is the gRPC status code (a number of connect's
 * `Code`; undefined for a failure the client found before sending), and the
 * details are whatever the server named: batch, record, type, field, reason.
 */
export class ProtobaseError extends Error implements ErrorDetails {
  readonly code: Code | undefined;
  readonly batch?: number;
  readonly record?: number;
  readonly type?: string;
  readonly field?: string;
  readonly reason?: string;
  readonly batchesApplied?: number;
  readonly recordsApplied?: number;
  readonly condition?: number;
  readonly version?: bigint;
  readonly query?: number;
  readonly oldest?: Position;
  /** The server's message, without the code in front. */
  readonly rawMessage: string;

  constructor(code: Code | undefined, message: string, details: ErrorDetails = {}, options?: { cause?: unknown }) {
    super(`${code === undefined ? "CLIENT" : codeName(code)}: ${message}${describe(details)}`, options);
    this.name = new.target.name;
    this.code = code;
    this.rawMessage = message;
    Object.assign(this, stripUndefined(details));
  }
}

export class Cancelled extends ProtobaseError {}
export class Unknown extends ProtobaseError {}
export class InvalidArgument extends ProtobaseError {}
export class DeadlineExceeded extends ProtobaseError {}
export class NotFound extends ProtobaseError {}
export class AlreadyExists extends ProtobaseError {}
export class PermissionDenied extends ProtobaseError {}
export class ResourceExhausted extends ProtobaseError {}
export class FailedPrecondition extends ProtobaseError {}
/** A batch refused because one of its conditions did not hold (ABORTED). */
export class Aborted extends ProtobaseError {}
/** A watch start (or resume) older than the changes the server keeps; `oldest` is where one can start. */
export class OutOfRange extends ProtobaseError {}
export class Unimplemented extends ProtobaseError {}
export class Internal extends ProtobaseError {}
export class Unavailable extends ProtobaseError {}
export class DataLoss extends ProtobaseError {}
export class Unauthenticated extends ProtobaseError {}

const classes: Record<number, typeof ProtobaseError> = {
  [Code.Canceled]: Cancelled,
  [Code.Unknown]: Unknown,
  [Code.InvalidArgument]: InvalidArgument,
  [Code.DeadlineExceeded]: DeadlineExceeded,
  [Code.NotFound]: NotFound,
  [Code.AlreadyExists]: AlreadyExists,
  [Code.PermissionDenied]: PermissionDenied,
  [Code.ResourceExhausted]: ResourceExhausted,
  [Code.FailedPrecondition]: FailedPrecondition,
  [Code.Aborted]: Aborted,
  [Code.OutOfRange]: OutOfRange,
  [Code.Unimplemented]: Unimplemented,
  [Code.Internal]: Internal,
  [Code.Unavailable]: Unavailable,
  [Code.DataLoss]: DataLoss,
  [Code.Unauthenticated]: Unauthenticated,
};

/** The class for a status code: `Unknown` for a code this client does not know. */
export function errorClass(code: Code): typeof ProtobaseError {
  return classes[code] ?? Unknown;
}

/** The error of a numbered status code with a message and details. */
export function errorOf(code: Code, message: string, details: ErrorDetails = {}, cause?: unknown): ProtobaseError {
  const Cls = errorClass(code);
  return new Cls(code, message, details, { cause });
}

/**
 * Turn anything a call threw into a ProtobaseError, reading the status
 * details. `applied` holds the counts a writer last had acknowledged, used
 * when the server sent no WriteError.
 */
export function fromCall(err: unknown, applied?: { batches: number; records: number }): ProtobaseError {
  if (err instanceof ProtobaseError) {
    return err;
  }
  const ce = ConnectError.from(err);
  const details: ErrorDetails = {};
  if (applied) {
    details.batchesApplied = applied.batches;
    details.recordsApplied = applied.records;
  }
  const we = ce.findDetails(WriteErrorSchema)[0];
  if (we) {
    details.batch = Number(we.batch);
    details.record = Number(we.record);
    details.type = we.typeUrl ? we.typeUrl.slice(we.typeUrl.lastIndexOf("/") + 1) : undefined;
    details.field = we.field || undefined;
    details.reason = we.reason || undefined;
    details.batchesApplied = Number(we.batchesApplied);
    details.recordsApplied = Number(we.recordsApplied);
    details.condition = we.condition;
    details.version = we.condition !== undefined ? we.version : undefined;
  }
  const pos = ce.findDetails(PositionSchema)[0];
  if (pos && ce.code === Code.OutOfRange) {
    details.oldest = Position.fromProto(pos);
  }
  const field = badRequestField(ce);
  if (field && !details.field) {
    details.field = field;
  }
  // A call that failed without a status from the server lost its
  // connection: connect names a reset stream or socket by Node's error
  // (ABORTED for ECONNRESET, CANCELED for a cancelled HTTP/2 stream,
  // INTERNAL), which here is UNAVAILABLE, as gRPC's other clients say.
  if (!ce.metadata.has("grpc-status") && lostConnection.has(ce.code) && !isAbort(err)) {
    return errorOf(Code.Unavailable, `connection lost: ${ce.rawMessage}`, details, err);
  }
  return errorOf(ce.code, ce.rawMessage, details, err);
}

const lostConnection = new Set<Code>([Code.Aborted, Code.Canceled, Code.Internal, Code.Unknown]);

function isAbort(err: unknown): boolean {
  const cause = err instanceof ConnectError ? err.cause : err;
  return cause instanceof Error && cause.name === "AbortError";
}

// badRequestField reads the first field violation of a google.rpc.BadRequest
// detail (field_violations = 1, each with field = 1), without the
// google.rpc descriptors.
function badRequestField(ce: ConnectError): string | undefined {
  for (const d of ce.details) {
    if (!("type" in d) || d.type !== "google.rpc.BadRequest") {
      continue;
    }
    try {
      const r = new BinaryReader(d.value);
      while (r.pos < r.len) {
        const [no, wt] = r.tag();
        if (no !== 1) {
          r.skip(wt);
          continue;
        }
        const v = new BinaryReader(r.bytes());
        while (v.pos < v.len) {
          const [fno, fwt] = v.tag();
          if (fno === 1) {
            return v.string();
          }
          v.skip(fwt);
        }
      }
    } catch {
      return undefined;
    }
  }
  return undefined;
}

function codeName(code: Code): string {
  return (Code[code] ?? "Unknown")
    .replace(/([a-z])([A-Z])/g, "$1_$2")
    .toUpperCase();
}

function describe(d: ErrorDetails): string {
  const parts: string[] = [];
  if (d.query !== undefined) parts.push(`query ${d.query}`);
  if (d.batch !== undefined) parts.push(`batch ${d.batch}`);
  if (d.record !== undefined) parts.push(`record ${d.record}`);
  if (d.type) parts.push(`type ${d.type}`);
  if (d.field) parts.push(`field ${d.field}`);
  return parts.length ? ` (${parts.join(", ")})` : "";
}

function stripUndefined(d: ErrorDetails): Partial<ErrorDetails> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(d)) {
    if (v !== undefined) out[k] = v;
  }
  return out as Partial<ErrorDetails>;
}
