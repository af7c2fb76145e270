// A producer, a worker and a followed run against a gateway (`switchyard serve`, then
// `npm run example`). Uses only the package's public API.

import { FailTask, Switchyard } from "../src/index.js";

export async function main(baseUrl: string, token?: string): Promise<{ results: unknown[]; kinds: string[] }> {
  const sy = new Switchyard({ baseUrl, token });

  // Queue some work, and a worker that does it: the return value is the task's result.
  const jobs = sy.queue("thumbnails");
  const ids: string[] = [];
  for (const size of [64, 128, 256]) ids.push((await jobs.submit({ size }, { max_attempts: 3 })).id);
  const worker = jobs.worker<{ size: number }>(
    async (task) => {
      await task.progress({ step: "resizing" });
      if (task.payload.size > 1024) throw new FailTask("too large");
      return { pixels: task.payload.size * task.payload.size };
    },
    { concurrency: 4 },
  );
  const running = worker.start();
  const results: unknown[] = [];
  for (const id of ids) results.push((await jobs.wait(id, { timeoutMs: 30_000 })).result);
  await worker.stop();
  await running;

  // An agent run, streamed as it is written.
  const run = await sy.runs.start({ session_id: `demo-${Date.now()}`, invocable: "helper", kind_of_invocable: "agent", input: [] });
  const kinds: string[] = [];
  const following = (async () => {
    for await (const frame of sy.runs.follow(run.run_id, { session: run.session_id ?? undefined })) {
      if (frame.type === "event") kinds.push(frame.data.kind);
    }
  })();
  const session = run.session_id ?? undefined;
  await sy.runs.append(run.run_id, { kind: "text.delta", message_id: "m1", text: "Hello" }, { session });
  await sy.runs.append(run.run_id, { kind: "run.completed", output: [], usage: { input_tokens: 1, output_tokens: 1, usd: null } }, { session });
  await following;
  return { results, kinds };
}

// `node build/examples/quickstart.js` (after `npm run build:test`) runs it against
// SWITCHYARD_URL (default: the gateway's own default address).
if (import.meta.url === `file://${process.argv[1]}`) {
  const url = process.env["SWITCHYARD_URL"] ?? "http://127.0.0.1:8080";
  main(url, process.env["SWITCHYARD_TOKEN"]).then(
    (out) => console.log(JSON.stringify(out, null, 2)),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
