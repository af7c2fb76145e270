/** A queue: submit and control tasks, read their records and ends, and the HTTP worker verbs. */

import type { Transport } from "./http.js";
import { seg } from "./http.js";
import type { FollowOptions, SseMessage } from "./sse.js";
import { followSse } from "./sse.js";
import type {
  AckItem,
  AckedMany,
  CancelAnswer,
  Cancelled,
  DeadLetterList,
  EventsPage,
  InFlightList,
  Json,
  Nacked,
  NackBody,
  PauseState,
  QueueStats,
  RequeueBody,
  Requeued,
  ReserveBody,
  ReservedTask,
  Reservations,
  Retention,
  RetentionBody,
  SubmitBody,
  Submitted,
  Task,
  TaskEnd,
  WaitingTasks,
} from "./types.js";
import type { WorkerOptions, Handler } from "./worker.js";
import { Worker } from "./worker.js";

/** A task to submit: `payload` plus `SubmitBody`'s options (`id`, `priority`, `delay_seconds`, …). */
export type SubmitOptions = Omit<SubmitBody, "payload">;

/** What following a queue's events yields. */
export type QueueFrame =
  /** A task ended: `event` is its end (`completed`, `failed`, `dead`, `cancelled`). */
  | { type: "end"; id: string; event: string; data: TaskEnd }
  /**
   * The cursor was trimmed (or was not one of this log): ends between it and the oldest kept
   * were lost, and following goes on from the oldest kept. Read the tasks you wait for by id.
   */
  | { type: "gap"; data: { requested: string; recovery: string } };

type Signal = { signal?: AbortSignal | undefined };

export class Queue {
  readonly name: string;
  readonly #t: Transport;
  readonly #base: string;

  constructor(transport: Transport, name: string) {
    this.#t = transport;
    this.name = name;
    this.#base = `/v1/queues/${seg(name)}`;
  }

  /** Submits a task; `duplicate` is true when its idempotency key was already used. */
  submit(payload: Json, options: SubmitOptions & Signal = {}): Promise<Submitted> {
    const { signal, ...rest } = options;
    return this.#t.json("POST", `${this.#base}/tasks`, { body: { ...rest, payload }, signal });
  }

  /** Every count of the queue, from one snapshot. */
  stats(options: Signal = {}): Promise<QueueStats> {
    return this.#t.json("GET", this.#base, { signal: options.signal });
  }

  /**
   * A task's record by id. With `waitSeconds` (≤ 60) it long-polls until the task ends (or the
   * wait passes, answering the record as it stands).
   */
  task(id: string, options: { waitSeconds?: number } & Signal = {}): Promise<Task> {
    const wait = options.waitSeconds ?? 0;
    return this.#t.json("GET", `${this.#base}/tasks/${seg(id)}`, {
      query: { wait_seconds: options.waitSeconds },
      extraTimeoutMs: wait * 1000,
      signal: options.signal,
    });
  }

  /**
   * Waits until the task ends and returns its record (its `result` when it completed), polling
   * in long polls of up to 30 s until `timeoutMs` (default: no limit) passes.
   */
  async wait(id: string, options: { timeoutMs?: number } & Signal = {}): Promise<Task> {
    const deadline = options.timeoutMs === undefined ? Number.POSITIVE_INFINITY : Date.now() + options.timeoutMs;
    for (;;) {
      const left = deadline - Date.now();
      // Whole seconds, rounded up: a last wait under one second must not become a busy loop.
      const waitSeconds = Math.max(0, Math.min(25, Math.ceil(left / 1000)));
      const task = await this.task(id, { waitSeconds, signal: options.signal });
      if (ENDED.has(task.state) || Date.now() >= deadline) return task;
    }
  }

  /**
   * Cancels a task: a scheduled or waiting one never runs (`cancelled`); a running one is marked
   * (`cancel_requested`) and its worker learns it on its next extend, progress or end; a
   * finished one is left alone (`finished`).
   */
  cancel(id: string, options: Signal = {}): Promise<Cancelled> {
    return this.#t.json("DELETE", `${this.#base}/tasks/${seg(id)}`, { signal: options.signal });
  }

  /** Cancels up to 1,000 tasks in one atomic step; one result per id, in order. */
  cancelMany(ids: string[], options: Signal = {}): Promise<CancelAnswer> {
    return this.#t.json("POST", `${this.#base}/tasks/cancel`, { body: { ids }, signal: options.signal });
  }

  /** Cancels every scheduled and waiting task (running ones are not touched); `purged` counts them. */
  purge(options: Signal = {}): Promise<CancelAnswer> {
    return this.#t.json("POST", `${this.#base}/tasks/cancel`, { body: { all_waiting: true }, signal: options.signal });
  }

  /** The next waiting tasks (at most `limit`). */
  waiting(options: { limit?: number } & Signal = {}): Promise<WaitingTasks> {
    return this.#t.json("GET", `${this.#base}/tasks`, { query: { limit: options.limit }, signal: options.signal });
  }

  /** Reservations in flight, with their progress (never their receipts). */
  inFlight(options: { limit?: number } & Signal = {}): Promise<InFlightList> {
    return this.#t.json("GET", `${this.#base}/in-flight`, { query: { limit: options.limit }, signal: options.signal });
  }

  /** Dead letters, oldest first, each with the `ref` that names it for a requeue. */
  deadLetters(options: { limit?: number } & Signal = {}): Promise<DeadLetterList> {
    return this.#t.json("GET", `${this.#base}/dead-letters`, { query: { limit: options.limit }, signal: options.signal });
  }

  /** Puts dead letters back in the queue: the oldest `limit`, or those named by `refs`. */
  requeue(request: RequeueBody = {}, options: Signal = {}): Promise<Requeued> {
    return this.#t.json("POST", `${this.#base}/dead-letters/requeue`, { body: request, signal: options.signal });
  }

  /** Stops reservations (submits are still taken). */
  pause(options: Signal = {}): Promise<PauseState> {
    return this.#t.json("POST", `${this.#base}/pause`, { signal: options.signal });
  }

  /** Lets reservations go on. */
  resume(options: Signal = {}): Promise<PauseState> {
    return this.#t.json("POST", `${this.#base}/resume`, { signal: options.signal });
  }

  /** At most `max` reservations per `perSeconds` across every worker. */
  setRateLimit(max: number, perSeconds: number, options: Signal = {}): Promise<QueueStats> {
    return this.#t.json("PUT", `${this.#base}/rate-limit`, { body: { max, per_seconds: perSeconds }, signal: options.signal });
  }

  /** Removes the rate limit. */
  clearRateLimit(options: Signal = {}): Promise<QueueStats> {
    return this.#t.json("DELETE", `${this.#base}/rate-limit`, { signal: options.signal });
  }

  /** What the queue keeps of finished tasks and of its events. */
  retention(options: Signal = {}): Promise<Retention> {
    return this.#t.json("GET", `${this.#base}/retention`, { signal: options.signal });
  }

  /** Replaces the retention of the kinds named. */
  setRetention(request: RetentionBody, options: Signal = {}): Promise<Retention> {
    return this.#t.json("PUT", `${this.#base}/retention`, { body: request, signal: options.signal });
  }

  /** One page of the queue's ends after `after` (absent: from the oldest kept); pass `cursor` on. */
  eventsPage(options: { after?: string; limit?: number } & Signal = {}): Promise<EventsPage> {
    return this.#t.json("GET", `${this.#base}/events/page`, {
      query: { after: options.after, limit: options.limit },
      signal: options.signal,
    });
  }

  /**
   * Follows the queue's task ends as they happen (at least once, in order), resuming after
   * `lastEventId` when given; without it, only new ends. It never ends by itself: stop it with
   * `signal` or by leaving the loop.
   */
  events(options: FollowOptions = {}): AsyncGenerator<QueueFrame, void, undefined> {
    return followSse(this.#t, `${this.#base}/events`, {}, options, classifyQueueMessage);
  }

  // The HTTP worker API: reserve, then end each reservation by its receipt.

  /**
   * Reserves up to `max` (≤ 100) due tasks for `visibility_seconds` (default 30), waiting up to
   * `wait_seconds` (≤ 30) while none is due. An empty list when nothing came.
   */
  async reserve(request: ReserveBody = {}, options: Signal = {}): Promise<ReservedTask[]> {
    const answer = await this.#t.json<Reservations>("POST", `${this.#base}/reservations`, {
      body: request,
      extraTimeoutMs: (request.wait_seconds ?? 0) * 1000,
      signal: options.signal,
    });
    return answer.tasks;
  }

  /** Completes a reservation, storing `result` (any JSON) with the task's end. */
  async ack(receipt: string, result?: Json, options: Signal = {}): Promise<void> {
    await this.#t.json("POST", `${this.#base}/reservations/${seg(receipt)}/ack`, {
      body: result === undefined ? {} : { result },
      signal: options.signal,
    });
  }

  /**
   * Completes up to 1,000 reservations in one request; each is answered on its own, in order (a
   * lost reservation is `ok: false` with `receipt_not_current`, not a thrown error).
   */
  ackMany(acks: AckItem[], options: Signal = {}): Promise<AckedMany> {
    return this.#t.json("POST", `${this.#base}/reservations/ack`, { body: { acks }, signal: options.signal });
  }

  /**
   * Gives a reservation back as a failed attempt: it is retried after `delay_seconds` (absent:
   * what the task's retry policy says), or dead-lettered when it was the last attempt.
   */
  nack(receipt: string, request: NackBody = {}, options: Signal = {}): Promise<Nacked> {
    return this.#t.json("POST", `${this.#base}/reservations/${seg(receipt)}/nack`, { body: request, signal: options.signal });
  }

  /** Dead-letters a reservation now, with `reason` as its last error. */
  async fail(receipt: string, reason?: string, options: Signal = {}): Promise<void> {
    await this.#t.json("POST", `${this.#base}/reservations/${seg(receipt)}/fail`, {
      body: reason === undefined ? {} : { reason },
      signal: options.signal,
    });
  }

  /** Keeps a reservation for `visibilitySeconds` more from now. */
  async extend(receipt: string, visibilitySeconds: number, options: Signal = {}): Promise<void> {
    await this.#t.json("POST", `${this.#base}/reservations/${seg(receipt)}/extend`, {
      body: { visibility_seconds: visibilitySeconds },
      signal: options.signal,
    });
  }

  /** Reports progress (any JSON ≤ 64 KiB), kept with the task and shown in flight. */
  async progress(receipt: string, value: Json, options: Signal = {}): Promise<void> {
    await this.#t.json("POST", `${this.#base}/reservations/${seg(receipt)}/progress`, { body: value, signal: options.signal });
  }

  /**
   * A worker that runs `handler` on this queue's tasks: reserve → extend while it runs →
   * ack with its return value, nack when it throws, fail on `FailTask`. Call `start()`.
   */
  worker<P = unknown>(handler: Handler<P>, options: WorkerOptions = {}): Worker<P> {
    return new Worker<P>(this, handler, options);
  }
}

const ENDED: ReadonlySet<string> = new Set(["completed", "failed", "dead", "cancelled"]);

function classifyQueueMessage(message: SseMessage): { frame: QueueFrame | undefined; done: boolean } {
  if (message.event === "gap" && (message.id === undefined || message.id === "")) {
    return { frame: { type: "gap", data: JSON.parse(message.data) as { requested: string; recovery: string } }, done: false };
  }
  if (message.id === undefined || message.id === "") return { frame: undefined, done: false };
  return { frame: { type: "end", id: message.id, event: message.event, data: JSON.parse(message.data) as TaskEnd }, done: false };
}
