// A Position is where a change sits in commit order: the commit (the
// position a durable write's acknowledgement carries) and the change's
// index within it; no index means the whole commit.

import { create } from "@bufbuild/protobuf";
import { PositionSchema, type Position as PositionMessage } from "./gen/protobase/v1/protobase_pb.js";

const UINT32_MAX = 0xffffffff;

export class Position {
  readonly commit: bigint;
  readonly index: number | undefined;

  constructor(commit: bigint | number, index?: number) {
    const c = BigInt(commit);
    if (c < 0n || c >= 1n << 64n) {
      throw new RangeError(`a position's commit must be in [0, 2**64), not ${c}`);
    }
    if (index !== undefined && (!Number.isInteger(index) || index < 0 || index > UINT32_MAX)) {
      throw new RangeError(`a position's index must be an integer in [0, 2**32), not ${index}`);
    }
    this.commit = c;
    this.index = index;
  }

  /** Read the text form: "C" (a whole commit) or "C.I". */
  static parse(text: string): Position {
    const m = /^([0-9]+)(?:\.([0-9]+))?$/.exec(text.trim());
    if (!m) {
      throw new SyntaxError(`a position is COMMIT or COMMIT.INDEX (digits), not ${JSON.stringify(text)}`);
    }
    return new Position(BigInt(m[1]!), m[2] === undefined ? undefined : Number(m[2]));
  }

  static fromProto(p: PositionMessage): Position {
    return new Position(p.commit, p.index);
  }

  toProto(): PositionMessage {
    return create(PositionSchema, { commit: this.commit, index: this.index });
  }

  /** Negative, zero or positive as this position is before, at or after `other`. */
  compare(other: Position): number {
    if (this.commit !== other.commit) {
      return this.commit < other.commit ? -1 : 1;
    }
    const a = this.index ?? UINT32_MAX + 1;
    const b = other.index ?? UINT32_MAX + 1;
    return a - b;
  }

  toString(): string {
    return this.index === undefined ? `${this.commit}` : `${this.commit}.${this.index}`;
  }
}
