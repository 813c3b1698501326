// encodeQuery writes a protobase.v1.Query's bytes straight from the
// options a caller gives, without building the message: protobuf-es's
// reflective create and encode cost more per primary-key lookup than the
// server spends answering it. The bytes are what protobuf-es writes for the
// same query (fields in number order, defaults left out).

import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ExprSchema } from "./gen/protobase/v1/protobase_pb.js";
import type { QueryOptions } from "./client.js";
import { ProtobaseError } from "./errors.js";

type ExprInit = MessageInitShape<typeof ExprSchema>;
type ComparisonInit = Extract<NonNullable<ExprInit["expr"]>, { case: "cmp" }>["value"];
type ValueInit = NonNullable<ComparisonInit["value"]>;

const utf8 = new TextEncoder();

class Bytes {
  buf: number[] = [];

  varint(n: number | bigint): void {
    let v = BigInt.asUintN(64, BigInt(n));
    if (v < 0x80n) {
      this.buf.push(Number(v));
      return;
    }
    while (v >= 0x80n) {
      this.buf.push(Number(v & 0x7fn) | 0x80);
      v >>= 7n;
    }
    this.buf.push(Number(v));
  }

  smallVarint(n: number): void {
    while (n >= 0x80) {
      this.buf.push((n & 0x7f) | 0x80);
      n = Math.floor(n / 128);
    }
    this.buf.push(n);
  }

  tag(no: number, wire: number): void {
    this.smallVarint((no << 3) | wire);
  }

  bytes(no: number, b: Uint8Array | number[]): void {
    this.tag(no, 2);
    this.smallVarint(b.length);
    for (let i = 0; i < b.length; i++) this.buf.push(b[i]!);
  }

  string(no: number, s: string): void {
    this.bytes(no, utf8.encode(s));
  }

  message(no: number, write: (w: Bytes) => void): void {
    const w = new Bytes();
    write(w);
    this.bytes(no, w.buf);
  }

  double(no: number, d: number): void {
    this.tag(no, 1);
    const b = new Uint8Array(8);
    new DataView(b.buffer).setFloat64(0, d, true);
    for (const x of b) this.buf.push(x);
  }
}

/**
 * The unknown field that carries these encoded messages as repeated field
 * `no` of a message: protobuf-es writes its tag, then the bytes, which
 * hold each message's length and the tags of the ones after the first.
 */
export function repeatedField(no: number, items: readonly Uint8Array[]): { no: number; wireType: 2; data: Uint8Array } {
  const w = new Bytes();
  items.forEach((item, i) => {
    if (i > 0) w.tag(no, 2);
    w.smallVarint(item.length);
    for (let j = 0; j < item.length; j++) w.buf.push(item[j]!);
  });
  return { no, wireType: 2, data: Uint8Array.from(w.buf) };
}

/** The bytes of a Query of `type` with these options. */
export function encodeQuery(type: string, o: QueryOptions): Uint8Array {
  if (o.filter && o.where) {
    throw new ProtobaseError(undefined, "a query has a filter or a where, not both", { field: "filter" });
  }
  const w = new Bytes();
  if (type) w.string(1, type);
  if (o.where) w.message(2, (e) => writeExpr(e, o.where!));
  if (o.limit) w.tag(3, 0), w.varint(o.limit);
  if (o.order) {
    const ord = o.order;
    w.message(4, (m) => {
      if (ord.index) m.string(1, ord.index);
      if (ord.descending) m.tag(2, 0), m.smallVarint(1);
    });
  }
  if (o.keysOnly) w.tag(5, 0), w.smallVarint(1);
  if (o.explain) w.tag(6, 0), w.smallVarint(1);
  if (o.count) w.tag(7, 0), w.smallVarint(1);
  if (o.filter) w.string(8, o.filter);
  if (o.versions) w.tag(9, 0), w.smallVarint(1);
  return Uint8Array.from(w.buf);
}

function writeExpr(w: Bytes, e: ExprInit): void {
  const x = e.expr;
  if (!x || x.case === undefined) return;
  switch (x.case) {
    case "cmp":
      w.message(1, (m) => writeComparison(m, x.value));
      return;
    case "and":
    case "or":
      w.message(x.case === "and" ? 2 : 3, (m) => {
        for (const sub of x.value.exprs ?? []) m.message(1, (s) => writeExpr(s, sub));
      });
      return;
    case "not":
      w.message(4, (m) => writeExpr(m, x.value));
      return;
  }
}

function writeComparison(w: Bytes, c: ComparisonInit): void {
  if (c.field) w.string(1, c.field);
  if (c.op) w.tag(2, 0), w.varint(c.op);
  if (c.value) w.message(3, (m) => writeValue(m, c.value!));
  for (const v of c.values ?? []) w.message(4, (m) => writeValue(m, v));
}

function writeValue(w: Bytes, v: ValueInit): void {
  const k = v.kind;
  if (!k || k.case === undefined) return;
  switch (k.case) {
    case "int":
    case "uint":
      w.tag(k.case === "int" ? 1 : 2, 0);
      w.varint(k.value);
      return;
    case "double":
      w.double(3, k.value);
      return;
    case "bool":
      w.tag(4, 0);
      w.smallVarint(k.value ? 1 : 0);
      return;
    case "string":
    case "enum":
      w.string(k.case === "string" ? 5 : 7, k.value);
      return;
    case "bytes":
      w.bytes(6, k.value);
      return;
  }
}
