// The README's walkthrough, through the client, against `switchyard serve` on the embedded
// default: start, a busy session refused, appends, the live stream, an interrupt resumed exactly
// once, the end, the read and the list.

import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { ConflictError, NotFoundError, type RunFrame, Switchyard } from "../src/index.js";
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

test("the walkthrough: start, append, stream, resume once, finish, read, list", async () => {
  const sy = new Switchyard({ baseUrl: gateway.url });
  const started = await sy.runs.start({
    run_id: "run-1",
    session_id: "s1",
    invocable: "helper",
    kind_of_invocable: "agent",
    input: [{ type: "text", text: "hello" }],
  });
  assert.equal(started.run_id, "run-1");
  assert.equal(started.status, "running");
  assert.equal(started.event.kind, "run.started");
  assert.equal(started.event.seq, 0);

  // One open run per session.
  await assert.rejects(
    sy.runs.start({ run_id: "run-2", session_id: "s1", invocable: "helper", kind_of_invocable: "agent", input: [] }),
    (error: unknown) => {
      assert.ok(error instanceof ConflictError);
      assert.equal(error.status, 409);
      assert.equal(error.code, "session_busy");
      assert.equal(error.heldBy, "run-1");
      assert.match(error.requestId ?? "", /.+/);
      return true;
    },
  );

  // Follow the stream while the run goes on.
  const frames: RunFrame[] = [];
  const following = (async () => {
    for await (const frame of sy.runs.follow("run-1", { session: "s1" })) frames.push(frame);
  })();

  const one = await sy.runs.append("run-1", { kind: "text.delta", message_id: "m1", text: "Hel" }, { session: "s1" });
  assert.equal(one.events[0]?.seq, 1);
  const batch = await sy.runs.append(
    "run-1",
    [
      { kind: "text.delta", message_id: "m1", text: "lo" },
      { kind: "run.interrupted", interrupt_id: "i1", reason: "approval", payload: {}, thread_id: null, expected_resume: null },
    ],
    { session: "s1" },
  );
  assert.equal(batch.status, "waiting_human");
  assert.deepEqual(
    batch.events.map((e) => e.seq),
    [2, 3],
  );

  // Of concurrent resumes exactly one wins.
  const resumes = await Promise.allSettled(
    Array.from({ length: 5 }, () => sy.runs.resume("run-1", { reason: "approved", value: [{ type: "text", text: "yes" }] }, { session: "s1" })),
  );
  const won = resumes.filter((r) => r.status === "fulfilled");
  assert.equal(won.length, 1);
  for (const r of resumes) {
    if (r.status === "rejected") {
      assert.ok(r.reason instanceof ConflictError);
      assert.equal(r.reason.code, "not_resumable");
    }
  }

  await sy.runs.append(
    "run-1",
    { kind: "run.completed", output: [], usage: { input_tokens: 3, output_tokens: 5, usd: null } },
    { session: "s1" },
  );
  await following;

  const kinds = frames.map((f) => (f.type === "event" ? f.data.kind : f.type));
  assert.deepEqual(kinds, ["run.started", "text.delta", "text.delta", "run.interrupted", "run.resumed", "run.completed", "end"]);
  const ids = frames.flatMap((f) => (f.type === "event" ? [f.id] : []));
  assert.equal(new Set(ids).size, ids.length, "every event once");

  const view = await sy.runs.get("run-1", { session: "s1", fromSeq: 4 });
  assert.equal(view.status, "completed");
  assert.deepEqual(
    view.events.map((e) => e.kind),
    ["run.resumed", "run.completed"],
  );
  const completed = await sy.runs.list({ status: "completed" });
  assert.deepEqual(
    completed.runs.map((r) => r.run_id),
    ["run-1"],
  );

  // A resumed follower gets exactly the events after its cursor, then the end.
  const cursor = ids[2];
  const rest: RunFrame[] = [];
  for await (const frame of sy.runs.follow("run-1", { session: "s1", lastEventId: cursor })) rest.push(frame);
  assert.deepEqual(
    rest.map((f) => (f.type === "event" ? f.id : f.type)),
    [...ids.slice(3), "end"],
  );
});

test("refusals are typed errors carrying the gateway's code, message and request id", async () => {
  const sy = new Switchyard({ baseUrl: gateway.url });
  await assert.rejects(sy.runs.get("no-such-run"), (error: unknown) => {
    assert.ok(error instanceof NotFoundError);
    assert.equal(error.status, 404);
    assert.match(error.code, /^[a-z_]+$/);
    assert.ok(error.message.length > 0);
    assert.ok(error.requestId);
    return true;
  });
  await assert.rejects(
    // A kind the event model does not know is refused on its field.
    sy.runs.append("run-1", { kind: "tool.call" } as never, { session: "s1" }),
    (error: unknown) => {
      assert.equal((error as { status?: number }).status, 422);
      assert.equal((error as { field?: string }).field, "kind");
      return true;
    },
  );
});
