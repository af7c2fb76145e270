// The example in examples/ runs as written against the embedded default.

import assert from "node:assert/strict";
import { test } from "node:test";

import { main } from "../examples/quickstart.js";
import { embedded, tempDir } from "./harness.js";

test("examples/quickstart.ts runs against a gateway", async () => {
  const dir = tempDir();
  const gateway = await embedded(dir.path);
  try {
    const out = await main(gateway.url);
    assert.deepEqual(out.results, [{ pixels: 4096 }, { pixels: 16384 }, { pixels: 65536 }]);
    assert.deepEqual(out.kinds, ["run.started", "text.delta", "run.completed"]);
  } finally {
    await gateway.stop();
    dir.remove();
  }
});
