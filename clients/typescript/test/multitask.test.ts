// A second message to a busy session and a cancel that reaches the worker (ADRs 0394, 0396),
// through the client, against `switchyard serve` on the embedded default: enqueued runs wait
// with their places and start in order, a worker following its signals sees a cancel and
// confirms it, and an interrupt ends the open run.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { type Multitask, NotFoundError, type Payload, type RunFrame, type StartRun, Switchyard } from "../src/index.js";
import { embedded, type Gateway, tempDir } from "./harness.js";

let gateway: Gateway;
const dir = tempDir();

before(async () => {
  gateway = await embedded(dir.path);
});
after(async () => {
  await gateway.stop();
  dir.remove();
});

const completed: Payload = {
  kind: "run.completed",
  output: [],
  usage: { input_tokens: 1, output_tokens: 1, usd: null },
};

function claimOf(runId: string, strategy: Multitask): StartRun {
  return {
    run_id: runId,
    session_id: "s1",
    invocable: "helper",
    kind_of_invocable: "agent",
    input: [],
    multitask_strategy: strategy,
  };
}

test("enqueued runs wait their turn, a cancel reaches the worker, an interrupt ends the open run", async () => {
  const sy = new Switchyard({ baseUrl: gateway.url });
  const holder = await sy.runs.claim(claimOf("holder", "reject"));
  assert.equal(holder.status, "running");
  const w1 = await sy.runs.claim(claimOf("w1", "enqueue"));
  const w2 = await sy.runs.claim(claimOf("w2", "enqueue"));
  assert.deepEqual([w1.status, "position" in w1 ? w1.position : 0], ["pending", 1]);
  assert.deepEqual([w2.status, "position" in w2 ? w2.position : 0], ["pending", 2]);
  const line = await sy.runs.line("s1");
  assert.deepEqual(
    line.runs.map((r) => [r.run_id, r.position]),
    [
      ["w1", 1],
      ["w2", 2],
    ],
  );
  await sy.runs.leaveLine("w2", { session: "s1" });
  await assert.rejects(sy.runs.turn("w2", { session: "s1" }), (e: unknown) => e instanceof NotFoundError && e.code === "not_waiting");

  // The holder's end starts w1 in the same request.
  await sy.runs.append("holder", completed, { session: "s1" });
  const turn = await sy.runs.turn("w1", { session: "s1", waitSecs: 5 });
  assert.equal(turn.status, "running");
  assert.equal(turn.event?.run_id, "w1");

  // w1's worker follows its signals; a cancel reaches it and it confirms.
  const seen: RunFrame[] = [];
  const worker = (async () => {
    for await (const frame of sy.runs.signals("w1", { session: "s1" })) {
      seen.push(frame);
      if (frame.type === "event" && frame.event === "control.requested") {
        await sy.runs.append("w1", { kind: "run.cancelled", reason: "stopped" }, { session: "s1" });
      }
    }
  })();
  await new Promise((r) => setTimeout(r, 200));
  const asked = await sy.runs.cancel("w1", { reason: "user pressed stop" }, { session: "s1" });
  assert.equal(asked.outcome, "requested");
  await worker;
  assert.deepEqual(
    seen.map((f) => (f.type === "event" ? f.event : f.type)),
    ["control.requested", "run.cancelled", "end"],
  );
  assert.equal((await sy.runs.get("w1", { session: "s1" })).status, "cancelled");

  // An interrupt ends the open run before its own start.
  await sy.runs.claim(claimOf("r3", "reject"));
  const boss = await sy.runs.claim(claimOf("boss", "interrupt"));
  assert.equal(boss.status, "running");
  assert.deepEqual("ended" in boss ? boss.ended : [], ["r3"]);
  assert.equal((await sy.runs.get("r3", { session: "s1" })).status, "cancelled");
});
