// A stream followed across a gateway restart: the follower reconnects with its last event id to
// the gateway that comes back on the same address (on Redis, where the stream outlives the
// process), and gets every event exactly once, then the end. A queue's end events resume the
// same way.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { type QueueFrame, type RunFrame, Switchyard } from "../src/index.js";
import { freePort, type Gateway, type Redis, startGateway, startRedis, tempDir, eventually } from "./harness.js";

const dir = tempDir();
let redis: Redis;
let listen: string;

before(async () => {
  redis = await startRedis();
  listen = `127.0.0.1:${await freePort()}`;
});
after(async () => {
  await redis.stop();
  dir.remove();
});

function serve(): Promise<Gateway> {
  return startGateway(dir.path, ["--redis", redis.url, "--no-scheduler"], listen);
}

test("a followed run resumes across a gateway restart with every event once", async () => {
  let gateway = await serve();
  const sy = new Switchyard({ baseUrl: gateway.url });
  await sy.runs.start({ run_id: "long", session_id: "r1", invocable: "helper", kind_of_invocable: "agent", input: [] });
  const frames: RunFrame[] = [];
  const reconnects: unknown[] = [];
  const following = (async () => {
    for await (const frame of sy.runs.follow("long", {
      session: "r1",
      reconnect: { initialDelayMs: 50, maxDelayMs: 200 },
      onReconnect: (info) => reconnects.push(info.error),
    })) {
      frames.push(frame);
    }
  })();
  for (let i = 0; i < 5; i++) await sy.runs.append("long", { kind: "text.delta", message_id: "m", text: `a${i}` }, { session: "r1" });
  await eventually(() => frames.length === 6, 10_000, "six frames before the restart");

  await gateway.stop();
  gateway = await serve();
  for (let i = 0; i < 5; i++) await sy.runs.append("long", { kind: "text.delta", message_id: "m", text: `b${i}` }, { session: "r1" });
  await sy.runs.append("long", { kind: "run.completed", output: [], usage: { input_tokens: 1, output_tokens: 1, usd: null } }, { session: "r1" });
  await following;
  await gateway.stop();

  assert.ok(reconnects.length >= 1, "the follower reconnected");
  const events = frames.flatMap((f) => (f.type === "event" ? [f.data] : []));
  assert.deepEqual(
    events.map((e) => e.seq),
    [...Array(12).keys()],
    "every seq once, in order",
  );
  assert.deepEqual(frames.at(-1), { type: "end" });
});

test("a queue's end events resume after the last id seen", async () => {
  const gateway = await serve();
  try {
    const sy = new Switchyard({ baseUrl: gateway.url });
    const q = sy.queue("ends");
    const abort = new AbortController();
    const seen: QueueFrame[] = [];
    const opened = q.events({ signal: abort.signal });
    const following = (async () => {
      for await (const frame of opened) seen.push(frame);
    })();
    // Without a cursor only new ends are sent: give the stream a moment to open.
    await new Promise((r) => setTimeout(r, 300));
    for (let i = 0; i < 4; i++) await q.submit({ i }, { id: `e${i}` });
    const worker = q.worker(async (task) => (task.payload as { i: number }).i, { waitSeconds: 1 });
    const done = worker.start();
    await eventually(() => seen.length === 4, 10_000, "four ends");
    await worker.stop();
    await done;
    abort.abort();
    await following;
    const ends = seen.flatMap((f) => (f.type === "end" ? [f] : []));
    assert.deepEqual(
      ends.map((f) => [f.event, f.data.task_id, f.data.result]),
      [0, 1, 2, 3].map((i) => ["completed", `e${i}`, i]),
    );

    // Resumed from the second end: exactly the two after it.
    const resumed: QueueFrame[] = [];
    const again = new AbortController();
    const tail = (async () => {
      for await (const frame of q.events({ lastEventId: ends[1]!.id, signal: again.signal })) resumed.push(frame);
    })();
    await eventually(() => resumed.length === 2, 10_000, "two resumed ends");
    again.abort();
    await tail;
    assert.deepEqual(
      resumed.map((f) => (f.type === "end" ? f.data.task_id : f.type)),
      ["e2", "e3"],
    );
  } finally {
    await gateway.stop();
  }
});
