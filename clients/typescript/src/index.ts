/**
 * `switchyard-client`: a typed client for the switchyard gateway.
 *
 * ```ts
 * import { Switchyard } from "switchyard-client";
 *
 * const sy = new Switchyard({ baseUrl: "http://127.0.0.1:8080", token: process.env.SWITCHYARD_TOKEN });
 * const run = await sy.runs.start({ session_id: "s1", invocable: "helper", kind_of_invocable: "agent", input: [] });
 * for await (const frame of sy.runs.follow(run.run_id, { session: "s1" })) { … }
 *
 * const jobs = sy.queue("jobs");
 * await jobs.submit({ url: "https://example.com" });
 * const worker = jobs.worker(async (task) => ({ fetched: task.payload }), { concurrency: 8 });
 * void worker.start();
 * ```
 */

import type { ClientOptions } from "./http.js";
import { Transport } from "./http.js";
import { Queue } from "./queues.js";
import { Runs } from "./runs.js";
import type { QueueList, Schedule, ScheduleList, WorkerList } from "./types.js";
import { seg } from "./http.js";

/** A gateway: its runs, its queues, its schedules and worker registry. */
export class Switchyard {
  readonly runs: Runs;
  readonly #t: Transport;

  constructor(options: ClientOptions) {
    this.#t = new Transport(options);
    this.runs = new Runs(this.#t);
  }

  /** The gateway's address, as given. */
  get baseUrl(): string {
    return this.#t.baseUrl;
  }

  /** A queue by name (nothing is sent until a method is called). */
  queue(name: string): Queue {
    return new Queue(this.#t, name);
  }

  /** The queues holding a task in any state, or watched, that the token may see. */
  queues(options: { signal?: AbortSignal } = {}): Promise<QueueList> {
    return this.#t.json("GET", "/v1/queues", { signal: options.signal });
  }

  /** The worker registry (optionally of one automation type). */
  workers(options: { automationType?: string; signal?: AbortSignal } = {}): Promise<WorkerList> {
    return this.#t.json("GET", "/v1/workers", { query: { automation_type: options.automationType }, signal: options.signal });
  }

  /** Every recurring schedule. */
  schedules(options: { signal?: AbortSignal } = {}): Promise<ScheduleList> {
    return this.#t.json("GET", "/v1/schedules", { signal: options.signal });
  }

  /**
   * Creates or replaces a schedule: `{cron (with seconds), timezone?, queue, payload?, priority?,
   * catch_up?: "latest" | "skip", enabled?}`.
   */
  putSchedule(name: string, spec: ScheduleSpec, options: { signal?: AbortSignal } = {}): Promise<Schedule> {
    return this.#t.json("PUT", `/v1/schedules/${seg(name)}`, { body: spec, signal: options.signal });
  }

  /** Deletes a schedule. */
  deleteSchedule(name: string, options: { signal?: AbortSignal } = {}): Promise<{ name: string; deleted: boolean }> {
    return this.#t.json("DELETE", `/v1/schedules/${seg(name)}`, { signal: options.signal });
  }
}

/** A schedule document. */
export interface ScheduleSpec {
  cron: string;
  timezone?: string;
  queue: string;
  payload?: unknown;
  priority?: number;
  catch_up?: "latest" | "skip";
  enabled?: boolean;
  created_at?: number;
}

export type { ClientOptions, Query } from "./http.js";
export { Transport } from "./http.js";
export * from "./errors.js";
export { Runs } from "./runs.js";
export type { RunAddress, RunFrame, StreamGap } from "./runs.js";
export { Queue } from "./queues.js";
export type { QueueFrame, SubmitOptions } from "./queues.js";
export { Worker, FailTask, RetryTask, TaskTimeoutError, WorkerStoppedError } from "./worker.js";
export type { Handler, TaskContext, WorkerOptions, WorkerStats } from "./worker.js";
export { SseParser, followSse } from "./sse.js";
export type { FollowOptions, ReconnectOptions, SseMessage } from "./sse.js";
export type * from "./types.js";
export type { components, paths, operations } from "./generated/openapi.js";
