// The client encodes queries itself (src/query_encode.ts): its bytes must
// be what protobuf-es encodes for the same Query, which the server reads.

import { it } from "node:test";
import assert from "node:assert/strict";
import { toBinary } from "@bufbuild/protobuf";
import { buildQuery, pb, type QueryOptions } from "../src/index.js";
import { encodeQuery } from "../src/query_encode.js";

const { Op } = pb;

it("encodes queries as protobuf-es does", () => {
  const cases: QueryOptions[] = [
    {},
    { filter: 'age >= 30 and name prefix "An"', limit: 10, count: true },
    { where: { expr: { case: "cmp", value: { field: "id", op: Op.EQ, value: { kind: { case: "int", value: 0n } } } } } },
    { where: { expr: { case: "cmp", value: { field: "id", op: Op.EQ, value: { kind: { case: "int", value: -5n } } } } } },
    {
      where: {
        expr: {
          case: "and",
          value: {
            exprs: [
              { expr: { case: "cmp", value: { field: "age", op: Op.GE, value: { kind: { case: "double", value: 2.5 } } } } },
              {
                expr: {
                  case: "not",
                  value: {
                    expr: {
                      case: "cmp",
                      value: {
                        field: "name",
                        op: Op.IN,
                        values: [
                          { kind: { case: "string", value: "Ann é" } },
                          { kind: { case: "bool", value: false } },
                          { kind: { case: "uint", value: 18446744073709551615n } },
                          { kind: { case: "bytes", value: new Uint8Array([1, 2, 255]) } },
                          { kind: { case: "enum", value: "ACTIVE" } },
                        ],
                      },
                    },
                  },
                },
              },
            ],
          },
        },
      },
      order: { index: "name", descending: true },
      keysOnly: true,
      explain: true,
      versions: true,
      limit: 300n,
    },
  ];
  for (const c of cases) {
    assert.deepEqual(encodeQuery("tstest.shop.User", c), toBinary(pb.QuerySchema, buildQuery("tstest.shop.User", c)), JSON.stringify(c, (_, v) => (typeof v === "bigint" ? `${v}` : v)));
  }
  assert.throws(() => encodeQuery("t", { filter: "a = 1", where: {} }), /filter or a where/);
});
