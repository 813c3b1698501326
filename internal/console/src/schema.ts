// The schema as GET /v1/schema answers it, and what the pages derive from
// it: a type's fields (from the descriptors), its primary key values, and
// what the caller's key may do.

import { call } from "./api.js";

export interface IndexInfo {
  name: string;
  fields?: string[];
  unique?: boolean;
  state?: string;
  error?: string;
  aggregate?: boolean;
  sum?: string[];
  recordsIndexed?: string;
}

export interface RecordType {
  name: string;
  primaryKey?: string[];
  indexes?: IndexInfo[];
}

export interface FieldDescriptor {
  name: string;
  number?: number;
  label?: string;
  type?: string;
  typeName?: string;
  jsonName?: string;
}

export interface MessageDescriptor {
  name: string;
  field?: FieldDescriptor[];
  nestedType?: MessageDescriptor[];
}

interface FileDescriptor {
  name?: string;
  package?: string;
  messageType?: MessageDescriptor[];
}

export interface Schema {
  files?: Record<string, string>;
  version?: string;
  types?: RecordType[];
  descriptors?: { file?: FileDescriptor[] };
  keyScope?: string[];
  keyRole?: string;
}

let current: Schema | null = null;

export async function loadSchema(opts: { key?: string; signal?: AbortSignal } = {}): Promise<Schema> {
  const s = await call<Schema>("GET", "/v1/schema", undefined, opts);
  current = s;
  return s;
}

export function cachedSchema(): Schema | null {
  return current;
}

export function forgetSchema(): void {
  current = null;
}

// Roles are ordered read < write < schema < admin; a server without keys
// answers no role and allows everything.
const roleRank: Record<string, number> = { read: 1, write: 2, schema: 3, admin: 4 };

function rank(s: Schema | null): number {
  const role = s?.keyRole ?? "";
  return role === "" ? 4 : roleRank[role] ?? 0;
}

export function mayWrite(s: Schema | null): boolean {
  return rank(s) >= 2;
}

export function mayChangeSchema(s: Schema | null): boolean {
  return rank(s) >= 3;
}

export function findType(s: Schema, name: string): RecordType | undefined {
  return (s.types ?? []).find((t) => t.name === name);
}

// message returns the descriptor of a message by full name.
export function message(s: Schema, fullName: string): MessageDescriptor | undefined {
  for (const f of s.descriptors?.file ?? []) {
    const prefix = f.package ? f.package + "." : "";
    const m = findMessage(f.messageType ?? [], prefix, fullName);
    if (m) {
      return m;
    }
  }
  return undefined;
}

function findMessage(ms: MessageDescriptor[], prefix: string, fullName: string): MessageDescriptor | undefined {
  for (const m of ms) {
    const name = prefix + m.name;
    if (name === fullName) {
      return m;
    }
    if (fullName.startsWith(name + ".")) {
      const nested = findMessage(m.nestedType ?? [], name + ".", fullName);
      if (nested) {
        return nested;
      }
    }
  }
  return undefined;
}

// fieldType is a field's type as .proto source spells it.
export function fieldType(f: FieldDescriptor): string {
  let t = (f.type ?? "").replace(/^TYPE_/, "").toLowerCase();
  if ((t === "message" || t === "enum") && f.typeName) {
    t = f.typeName.replace(/^\./, "");
  }
  return (f.label === "LABEL_REPEATED" ? "repeated " : "") + t;
}

const sixtyFourBit = new Set(["TYPE_INT64", "TYPE_UINT64", "TYPE_SINT64", "TYPE_FIXED64", "TYPE_SFIXED64"]);

// zeroValue is the JSON of a field's default value, as protobuf's JSON
// mapping writes it (64-bit integers are strings).
export function zeroValue(f: FieldDescriptor): unknown {
  if (f.label === "LABEL_REPEATED") {
    return [];
  }
  const t = f.type ?? "";
  if (sixtyFourBit.has(t)) {
    return "0";
  }
  switch (t) {
    case "TYPE_STRING":
    case "TYPE_BYTES":
      return "";
    case "TYPE_BOOL":
      return false;
    case "TYPE_MESSAGE":
      return null;
    case "TYPE_ENUM":
      return 0;
  }
  return 0;
}

function fieldByPath(s: Schema, typeName: string, path: string): { f: FieldDescriptor; json: string[] } | undefined {
  let m = message(s, typeName);
  const json: string[] = [];
  let f: FieldDescriptor | undefined;
  for (const seg of path.split(".")) {
    f = m?.field?.find((x) => x.name === seg);
    if (!f) {
      return undefined;
    }
    json.push(f.jsonName ?? f.name);
    m = f.typeName ? message(s, f.typeName.replace(/^\./, "")) : undefined;
  }
  return f ? { f, json } : undefined;
}

// keyOf returns a record's primary key values, in primary_key order, as
// JSON values (the form GET /v1/records:get takes). A field the JSON
// leaves out holds its default value.
export function keyOf(s: Schema, typeName: string, rec: Record<string, unknown>): unknown[] {
  const t = findType(s, typeName);
  return (t?.primaryKey ?? []).map((path) => {
    const fd = fieldByPath(s, typeName, path);
    const names = fd?.json ?? path.split(".");
    let v: unknown = rec;
    for (let i = 0; i < names.length; i++) {
      const o = v as Record<string, unknown> | undefined;
      const name = names[i] ?? "";
      const raw = path.split(".")[i] ?? "";
      v = o && typeof o === "object" ? (o[name] ?? o[raw]) : undefined;
    }
    return v === undefined || v === null ? (fd ? zeroValue(fd.f) : null) : v;
  });
}

// template is a new record of a type: "@type" and every field at its
// default value, for the user to fill in.
export function template(s: Schema, typeName: string): Record<string, unknown> {
  const out: Record<string, unknown> = { "@type": "type.googleapis.com/" + typeName };
  for (const f of message(s, typeName)?.field ?? []) {
    const z = zeroValue(f);
    out[f.jsonName ?? f.name] = z === null ? {} : z;
  }
  return out;
}

export function stateName(state: string | undefined): string {
  return (state ?? "INDEX_STATE_UNSPECIFIED").replace(/^INDEX_STATE_/, "");
}

// buildProgress is the progress of an index build as text: the records
// indexed so far, of the type's count when it is known.
export function buildProgress(ix: IndexInfo, count?: string): string {
  return "building: " + (ix.recordsIndexed ?? "0") + (count !== undefined ? " of " + count : "") + " records indexed";
}
