// Records travel as google.protobuf.Any. A record is either a message of a
// generated schema the caller passes (protoc-gen-es), or JSON in protobuf's
// JSON mapping, converted with the descriptors the server's GetSchema
// answers, so that nothing needs to be generated from a user's schema.

import {
  createFileRegistry,
  fromBinary,
  fromJson,
  toBinary,
  toJson,
  type DescMessage,
  type FileRegistry,
  type JsonObject,
  type JsonValue,
  type MessageShape,
} from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import { AnySchema, type Any } from "@bufbuild/protobuf/wkt";
import type { GetSchemaResponse } from "./gen/protobase/v1/protobase_pb.js";
import { ProtobaseError } from "./errors.js";

export const TYPE_URL_PREFIX = "type.googleapis.com/";

/**
 * Names a record type: its full name (records are JSON objects) or a
 * generated message schema (records are its messages).
 */
export type RecordType<Desc extends DescMessage = DescMessage> = string | Desc;

/** The record a read returns for a RecordType: a message of a schema, or JSON. */
export type RecordOf<T> = T extends DescMessage ? MessageShape<T> : JsonObject;

/** What a reader needs of a google.protobuf.Any: its type URL and value. */
export type AnyLike = Pick<Any, "typeUrl" | "value">;

/** The type name in a type URL. */
export function typeNameOf(typeUrl: string): string {
  return typeUrl.slice(typeUrl.lastIndexOf("/") + 1);
}

/** The full name of a RecordType. */
export function typeName(t: RecordType): string {
  return typeof t === "string" ? t : t.typeName;
}

/**
 * Schema holds the server's descriptors (from GetSchema) as a registry, and
 * converts records between JSON and Any with them.
 */
export class Schema {
  readonly registry: FileRegistry;
  readonly response: GetSchemaResponse;

  constructor(response: GetSchemaResponse) {
    this.response = response;
    if (!response.descriptors) {
      throw new ProtobaseError(undefined, "the server's schema carries no descriptors");
    }
    this.registry = createFileRegistry(response.descriptors);
  }

  /** The version of the schema. */
  get version(): bigint {
    return this.response.version;
  }

  /** The descriptor of a record type, or undefined if the schema has none of that name. */
  message(name: string): DescMessage | undefined {
    return this.registry.getMessage(name);
  }

  /** The descriptor of a record type; an error naming the type if the schema lacks it. */
  need(name: string): DescMessage {
    const d = this.message(name);
    if (!d) {
      throw new ProtobaseError(undefined, `the server's schema has no message type ${JSON.stringify(name)}`, { type: name });
    }
    return d;
  }

  /** Encode a JSON record of a type as the bytes of its message. */
  encodeJson(name: string, json: JsonValue): Uint8Array {
    const desc = this.need(name);
    try {
      return toBinary(desc, fromJson(desc, json, { registry: this.registry }));
    } catch (e) {
      throw new ProtobaseError(undefined, `a ${name} record does not convert from JSON: ${(e as Error).message}`, {
        type: name,
        reason: (e as Error).message,
      });
    }
  }

  /** Pack a JSON record of a type as an Any. */
  packJson(name: string, json: JsonValue): Any {
    return create(AnySchema, { typeUrl: TYPE_URL_PREFIX + name, value: this.encodeJson(name, json) });
  }

  /** Decode the record in an Any as JSON (protobuf's JSON mapping). */
  decodeJson(any: AnyLike): JsonObject {
    const name = typeNameOf(any.typeUrl);
    const desc = this.need(name);
    return toJson(desc, fromBinary(desc, any.value), { registry: this.registry }) as JsonObject;
  }
}

/** Pack a message of a generated schema as an Any. */
export function packMessage<Desc extends DescMessage>(desc: Desc, msg: MessageShape<Desc>): Any {
  return create(AnySchema, { typeUrl: TYPE_URL_PREFIX + desc.typeName, value: toBinary(desc, msg) });
}

/** Unpack an Any as a message of a generated schema; an error if the type differs. */
export function unpackMessage<Desc extends DescMessage>(desc: Desc, any: AnyLike): MessageShape<Desc> {
  const name = typeNameOf(any.typeUrl);
  if (name !== desc.typeName) {
    throw new ProtobaseError(undefined, `a record of type ${name} read as ${desc.typeName}`, { type: name });
  }
  return fromBinary(desc, any.value);
}
