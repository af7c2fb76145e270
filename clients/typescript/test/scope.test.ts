// Tokens: a client scoped to some namespaces and queues is refused outside them with typed
// errors, and a browser-style follower with a stream ticket (no token) reads one run's stream.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { ForbiddenError, type RunFrame, Switchyard, UnauthorizedError } from "../src/index.js";
import { embedded, type Gateway, newToken, tempDir, writeTokenFile } from "./harness.js";

const dir = tempDir();
let gateway: Gateway;
let tenantA: string;
let reader: string;

before(async () => {
  const a = newToken(dir.path, "tenant-a", ["--namespace", "tenant-a*", "--queue", "jobs-a*", "--right", "read", "--right", "write"]);
  const ro = newToken(dir.path, "reader", ["--namespace", "tenant-a", "--queue", "*", "--right", "read"]);
  tenantA = a.secret;
  reader = ro.secret;
  const file = writeTokenFile(dir.path, [a.entry, ro.entry]);
  gateway = await embedded(dir.path, ["--auth", file]);
});
after(async () => {
  await gateway.stop();
  dir.remove();
});

test("a token-scoped client is refused outside its scope", async () => {
  const a = new Switchyard({ baseUrl: gateway.url, token: tenantA });
  await a.runs.start({ run_id: "r1", namespace: "tenant-a", invocable: "x", kind_of_invocable: "agent", input: [] });
  await a.queue("jobs-a1").submit({ ok: true });

  const refusals: Array<[string, () => Promise<unknown>]> = [
    ["another namespace's run", () => a.runs.start({ run_id: "r2", namespace: "tenant-b", invocable: "x", kind_of_invocable: "agent", input: [] })],
    ["another queue's submit", () => a.queue("jobs-b1").submit({ ok: false })],
    ["another queue's stats", () => a.queue("jobs-b1").stats()],
  ];
  for (const [what, call] of refusals) {
    await assert.rejects(call(), (error: unknown) => {
      assert.ok(error instanceof ForbiddenError, `${what}: ${String(error)}`);
      assert.equal(error.status, 403);
      assert.ok(error.requestId, `${what}: the request id`);
      assert.ok(!error.message.includes(tenantA), "the secret is never echoed");
      return true;
    });
  }
  // A read-only token cannot write.
  const ro = new Switchyard({ baseUrl: gateway.url, token: reader });
  await assert.rejects(ro.queue("jobs-a1").submit({}), ForbiddenError);
  // No token, or a wrong one: 401.
  await assert.rejects(new Switchyard({ baseUrl: gateway.url }).runs.list(), UnauthorizedError);
  await assert.rejects(new Switchyard({ baseUrl: gateway.url, token: "sy_wrong" }).runs.list(), UnauthorizedError);
});

test("a stream ticket lets a token-less follower read one run, and only that run", async () => {
  const a = new Switchyard({ baseUrl: gateway.url, token: tenantA });
  await a.runs.start({ run_id: "t1", namespace: "tenant-a", invocable: "x", kind_of_invocable: "agent", input: [] });
  await a.runs.append("t1", { kind: "text.delta", message_id: "m", text: "hi" }, { namespace: "tenant-a" });
  await a.runs.append("t1", { kind: "run.completed", output: [], usage: { input_tokens: 0, output_tokens: 0, usd: null } }, { namespace: "tenant-a" });

  // What a page would do: it holds no token, and asks its own server for a ticket each time.
  let asked = 0;
  const page = new Switchyard({ baseUrl: gateway.url });
  const frames: RunFrame[] = [];
  for await (const frame of page.runs.follow("t1", {
    namespace: "tenant-a",
    ticket: async () => {
      asked++;
      return (await a.runs.streamTicket("t1", { namespace: "tenant-a" })).ticket;
    },
  })) {
    frames.push(frame);
  }
  assert.equal(asked, 1);
  assert.deepEqual(
    frames.map((f) => (f.type === "event" ? f.data.kind : f.type)),
    ["run.started", "text.delta", "run.completed", "end"],
  );

  // The ticket opens t1's stream only.
  await a.runs.start({ run_id: "t2", namespace: "tenant-a", invocable: "x", kind_of_invocable: "agent", input: [] });
  const ticket = (await a.runs.streamTicket("t1", { namespace: "tenant-a" })).ticket;
  const other = page.runs.follow("t2", { namespace: "tenant-a", ticket });
  await assert.rejects(other.next(), UnauthorizedError);

  // A provider whose tickets keep being refused is asked again once, then the refusal is final.
  let refusedAsks = 0;
  const wrong = page.runs.follow("t2", {
    namespace: "tenant-a",
    ticket: async () => {
      refusedAsks++;
      return (await a.runs.streamTicket("t1", { namespace: "tenant-a" })).ticket;
    },
  });
  await assert.rejects(wrong.next(), UnauthorizedError);
  assert.equal(refusedAsks, 2);
});
