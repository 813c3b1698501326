// The example (examples/quickstart.ts) runs against a real server, twice.

import { it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { startServer, TS_DIR } from "./server.js";

it("runs the quick start example, twice", async () => {
  const server = await startServer();
  try {
    const run = (): string =>
      execFileSync(
        process.execPath,
        [join(TS_DIR, "dist", "examples", "quickstart.js"), join(TS_DIR, "examples", "proto", "shop.proto"), server.addr],
        { encoding: "utf8", timeout: 120_000 },
      );
    for (let i = 0; i < 2; i++) {
      const out = run();
      assert.match(out, /^wrote 2 records$/m);
      assert.match(out, /^refused: AlreadyExists batch 0 record 0 field email$/m);
      assert.match(out, /^ada: Ada \| over 40: \[ 'Alan' \]$/m);
      assert.match(out, /^page: \[ 'Ada' \]\npage: \[ 'Alan' \]$/m);
      assert.match(out, /^get: \[\{"id":"101","name":"Ada","email":"ada@example.com","age":36\}\] missing: \[ 1 \]$/m);
      assert.match(out, /^watch: insert Alan at \d+\.1$/m);
    }
  } finally {
    await server.stop();
  }
});
