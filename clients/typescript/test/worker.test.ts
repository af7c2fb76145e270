// The worker against real gateways (the embedded default, and Redis): 200 tasks through 4
// workers with retries and dead letters, a cancel that reaches a running handler, a timeout, and
// a graceful stop.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { FailTask, type Queue, Switchyard, TaskCancelledError, type Worker } from "../src/index.js";
import { embedded, eventually, type Gateway, type Redis, startGateway, startRedis, tempDir } from "./harness.js";

interface Job {
  n: number;
}

const backends: Array<{ name: string; start: (dir: string) => Promise<{ gateway: Gateway; redis?: Redis }> }> = [
  { name: "embedded SQLite", start: async (dir) => ({ gateway: await embedded(dir) }) },
  {
    name: "Redis",
    start: async (dir) => {
      const redis = await startRedis();
      return { gateway: await startGateway(dir, ["--redis", redis.url, "--no-scheduler"]), redis };
    },
  },
];

for (const backend of backends) {
  describe(`worker on ${backend.name}`, () => {
    const dir = tempDir();
    let gateway: Gateway;
    let redis: Redis | undefined;
    let sy: Switchyard;

    before(async () => {
      ({ gateway, redis } = await backend.start(dir.path));
      sy = new Switchyard({ baseUrl: gateway.url });
    });
    after(async () => {
      await gateway.stop();
      await redis?.stop();
      dir.remove();
    });

    test("200 tasks through 4 workers: results, retries and dead letters, each task ended once", async () => {
      const jobs = sy.queue("jobs");
      // n % 10 == 0 always fails (dead after its 2 attempts); n % 7 == 0 fails its first attempt;
      // n % 25 == 1 gives up at once (FailTask); every other task succeeds.
      const calls = new Map<number, number[]>();
      const handler = (task: { payload: Job; attempt: number }): { double: number } => {
        const { n } = task.payload;
        calls.set(n, [...(calls.get(n) ?? []), task.attempt]);
        if (n % 10 === 0) throw new Error(`task ${n} always fails`);
        if (n % 25 === 1) throw new FailTask(`task ${n} cannot succeed`);
        if (n % 7 === 0 && task.attempt === 1) throw new Error(`task ${n} fails once`);
        return { double: n * 2 };
      };
      for (let n = 0; n < 200; n++) {
        await jobs.submit({ n }, { id: `t${n}`, max_attempts: 2, retry: { backoff: "fixed", base_seconds: 0.05 } });
      }
      const workers: Worker<Job>[] = Array.from({ length: 4 }, () =>
        jobs.worker<Job>(handler, { concurrency: 4, waitSeconds: 1, visibilitySeconds: 10 }),
      );
      const running = workers.map((w) => w.start());
      const ends = (n: number): "dead" | "completed" => (n % 10 === 0 || n % 25 === 1 ? "dead" : "completed");
      await eventually(
        async () => {
          const s = await jobs.stats();
          return (s.completed ?? 0) + (s.dead_lettered ?? 0) >= 200;
        },
        60_000,
        "200 ends",
      );
      await Promise.all(workers.map((w) => w.stop()));
      await Promise.all(running);

      const stats = await jobs.stats();
      const expectedDead = [...Array(200).keys()].filter((n) => ends(n) === "dead").length;
      assert.equal(stats.completed, 200 - expectedDead);
      assert.equal(stats.dead_lettered, expectedDead);
      assert.equal(stats.waiting + stats.in_flight + stats.scheduled, 0);
      for (let n = 0; n < 200; n++) {
        const task = await jobs.task(`t${n}`);
        assert.equal(task.state, ends(n), `t${n}`);
        const attempts = calls.get(n) ?? [];
        if (n % 10 === 0) assert.deepEqual(attempts, [1, 2], `t${n} ran twice, then died`);
        else if (n % 25 === 1) assert.deepEqual(attempts, [1], `t${n} failed at once`);
        else if (n % 7 === 0) assert.deepEqual(attempts, [1, 2], `t${n} retried once`);
        else assert.deepEqual(attempts, [1], `t${n} ran once`);
        if (ends(n) === "completed") assert.deepEqual(task.result, { double: n * 2 });
        else assert.ok(task.last_error, `t${n} keeps its error`);
      }
      const total = workers.reduce(
        (acc, w) => ({
          completed: acc.completed + w.stats.completed,
          retried: acc.retried + w.stats.retried,
          dead: acc.dead + w.stats.deadLettered,
        }),
        { completed: 0, retried: 0, dead: 0 },
      );
      assert.equal(total.completed, 200 - expectedDead);
      assert.equal(total.dead, expectedDead);
      const retriedOnce = [...Array(200).keys()].filter((n) => n % 10 === 0 || (n % 7 === 0 && n % 25 !== 1)).length;
      assert.equal(total.retried, retriedOnce);
      const dead = await jobs.deadLetters({ limit: 1000 });
      assert.equal(dead.total, expectedDead);
    });

    test("a cancel reaches the running handler through its signal; the task ends cancelled", async () => {
      const q: Queue = sy.queue("cancels");
      await q.submit({ n: 1 }, { id: "long" });
      let reason: unknown;
      let markStarted!: () => void;
      const started = new Promise<void>((resolve) => (markStarted = resolve));
      const worker = q.worker(
        async (task) => {
          markStarted();
          await new Promise<void>((resolve) => task.signal.addEventListener("abort", () => resolve(), { once: true }));
          reason = task.signal.reason;
          return { ignored: true };
        },
        { visibilitySeconds: 0.6, extendEverySeconds: 0.1, waitSeconds: 1 },
      );
      const done = worker.start();
      await started;
      const answer = await q.cancel("long");
      assert.equal(answer.outcome, "cancel_requested");
      await eventually(() => worker.stats.cancelled === 1, 10_000, "the worker learned the cancel");
      assert.ok(reason instanceof TaskCancelledError);
      const task = await q.task("long");
      assert.equal(task.state, "cancelled");
      assert.equal(task.result, null, "a cancelled task's return value is not stored");
      await worker.stop();
      await done;
    });

    test("a return value JSON cannot carry fails its own task, not the batch it would ack in", async () => {
      const q = sy.queue("values");
      for (let i = 0; i < 8; i++) await q.submit({ n: i }, { id: `v${i}`, max_attempts: 1 });
      const worker = q.worker<Job>(
        (task) => (task.payload.n === 3 ? ({ big: 10n } as unknown as number) : task.payload.n),
        { concurrency: 8, waitSeconds: 1 },
      );
      const done = worker.start();
      await eventually(() => worker.stats.completed + worker.stats.deadLettered === 8, 10_000, "eight ends");
      await worker.stop();
      await done;
      assert.equal(worker.stats.completed, 7);
      const bad = await q.task("v3");
      assert.equal(bad.state, "dead");
      assert.match(bad.last_error ?? "", /BigInt/);
      assert.equal((await q.task("v4")).result, 4);
    });

    test("results over the body limit together, not alone, are acked one by one", async () => {
      const q = sy.queue("bulky");
      // 16 results of 200 kB: about 3.2 MB in one batch, past the ack route's limit (the result
      // limit, 1 MiB, plus 64 KiB), though each is within it.
      for (let i = 0; i < 16; i++) await q.submit({ n: i }, { id: `b${i}` });
      const worker = q.worker<Job>((task) => `${task.payload.n}:`.padEnd(200_000, "x"), {
        concurrency: 16,
        waitSeconds: 1,
      });
      const done = worker.start();
      await eventually(() => worker.stats.completed === 16, 15_000, "sixteen acks");
      await worker.stop();
      await done;
      assert.equal(worker.stats.deadLettered, 0);
      const stored = await q.task("b7");
      assert.equal(stored.state, "completed");
      assert.equal(typeof stored.result === "string" ? stored.result.length : 0, 200_000);
    });

    test("stop: no new reservations, the running handler finishes and is acked", async () => {
      const q = sy.queue("stops");
      for (let i = 0; i < 3; i++) await q.submit({ n: i }, { id: `s${i}` });
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const seen: number[] = [];
      const worker = q.worker<Job>(
        async (task) => {
          seen.push(task.payload.n);
          await gate;
          return task.payload.n;
        },
        { concurrency: 1, waitSeconds: 1 },
      );
      const done = worker.start();
      await eventually(() => seen.length === 1, 10_000, "one task running");
      const stopping = worker.stop();
      setTimeout(release, 200);
      await stopping;
      await done;
      assert.deepEqual(seen, [0]);
      assert.equal(worker.stats.completed, 1);
      assert.equal((await q.task("s0")).state, "completed");
      assert.equal((await q.task("s1")).state, "waiting");
    });
  });
}
