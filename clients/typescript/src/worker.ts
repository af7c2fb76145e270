/**
 * A worker over the gateway's HTTP worker API: it reserves as many tasks as it has free slots,
 * runs the handler on each while a timer extends the reservation, and ends each one by what the
 * handler did: a return value is the ack's result, a thrown `FailTask` dead-letters the task, any
 * other error is a nack (retried per the task's retry policy, dead-lettered at its last attempt).
 *
 * The handler's `signal` aborts when the task is cancelled (the gateway answers an extend or
 * progress with 409 `cancelled`), when its reservation is lost, at the task's deadline, or when
 * the worker stops past its grace. A handler should stop then; what it returns is not stored. A
 * cancelled task is given back and the gateway ends it `cancelled` (never retried); a lost one
 * belongs to another delivery; a timed-out or stopped one is given back with a nack. JavaScript cannot kill a promise, so a handler
 * that ignores its signal keeps running, but its slot is freed after `cancelGraceMs`.
 *
 * Delivery is at least once, as with every queue that leases work: a worker that dies holding a
 * task (or never gets its ack through) loses the reservation, and the task runs again.
 */

import {
  ConflictError,
  ReceiptLostError,
  SwitchyardError,
  TaskCancelledError,
  TooLargeError,
} from "./errors.js";
import { isAbort, sleep } from "./http.js";
import type { Queue } from "./queues.js";
import type { AckOutcome, Json, LastError, ReservedTask } from "./types.js";

/** What a handler sees of one delivery. */
export interface TaskContext<P = unknown> {
  /** The task id (null when the body is not a task envelope). */
  readonly id: string | null;
  /** This delivery's receipt. */
  readonly receipt: string;
  /** The task's payload. */
  readonly payload: P;
  /** This delivery's attempt (1 on the first). */
  readonly attempt: number;
  /** The attempts the task is given; a failure at the last one dead-letters it. */
  readonly maxAttempts: number;
  /** `high`, `normal` or `low`. */
  readonly priority: string;
  /** Why the previous attempt failed, if it did. */
  readonly lastError: LastError | null | undefined;
  /** Unix seconds by which this attempt must end (the task's `timeout_seconds`), if any. */
  readonly deadline: number | null | undefined;
  /**
   * Aborted when the handler should stop; `signal.reason` says why: a `TaskCancelledError`, a
   * `ReceiptLostError`, a `TaskTimeoutError` or a `WorkerStoppedError`.
   */
  readonly signal: AbortSignal;
  /** Reports progress (any JSON ≤ 64 KiB); throws `TaskCancelledError` once the task is cancelled. */
  progress(value: Json): Promise<void>;
  /** The reservation as the gateway sent it. */
  readonly reservation: ReservedTask;
}

/** The handler: its return value (any JSON, or nothing) is stored as the task's result. */
export type Handler<P = unknown> = (task: TaskContext<P>) => Promise<Json | undefined | void> | Json | undefined | void;

/** Thrown by a handler: the task cannot succeed; dead-letter it now, without the remaining attempts. */
export class FailTask extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "FailTask";
  }
}

/** Thrown by a handler: retry the task after `delaySeconds` (absent: per its retry policy). */
export class RetryTask extends Error {
  readonly delaySeconds: number | undefined;
  constructor(message: string, options?: { delaySeconds?: number; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "RetryTask";
    this.delaySeconds = options?.delaySeconds;
  }
}

/** The reason of a handler's signal at the task's deadline. */
export class TaskTimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TaskTimeoutError";
  }
}

/** The reason of a handler's signal when the worker stops past its grace. */
export class WorkerStoppedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WorkerStoppedError";
  }
}

/** How a worker runs. */
export interface WorkerOptions {
  /** Handlers running at once (1 to 1,000; default 1). */
  concurrency?: number | undefined;
  /** Seconds each reservation lasts between extends (default 30). */
  visibilitySeconds?: number | undefined;
  /** How often a running task's reservation is extended, in seconds (default a third of the visibility). */
  extendEverySeconds?: number | undefined;
  /** Seconds a reserve long-polls while nothing is due (0 to 30; default 5): also the most `stop()` waits for it. */
  waitSeconds?: number | undefined;
  /** Send acks together (`ackMany`) when they come within `ackWindowMs` (default: on when concurrency > 1). */
  batchAcks?: boolean | undefined;
  /** How long acks wait for company, in ms (default 5). */
  ackWindowMs?: number | undefined;
  /** Milliseconds a handler gets to settle after its signal aborts before its slot is freed (default 5,000). */
  cancelGraceMs?: number | undefined;
  /** Stops the worker (as `stop()` with the default grace). */
  signal?: AbortSignal | undefined;
  /**
   * Told of every error the worker handled and went on from: a handler's failure (the task was
   * nacked or failed), a lost reservation, a reserve that failed and is retried.
   */
  onError?: ((error: unknown, task: ReservedTask | undefined) => void) | undefined;
}

/** What a worker did so far. */
export interface WorkerStats {
  /** Deliveries taken. */
  reserved: number;
  /** Acked. */
  completed: number;
  /** Nacked for a retry. */
  retried: number;
  /** Dead-lettered: `FailTask`, a failure at the last attempt, or a malformed body. */
  deadLettered: number;
  /** Stopped because the task was cancelled. */
  cancelled: number;
  /** Reservations lost to a lapse (the task went to another delivery). */
  lost: number;
  /** Attempts past the task's deadline. */
  timedOut: number;
}

interface PendingAck {
  receipt: string;
  result: Json | undefined;
  resolve: (outcome: AckOutcome) => void;
  reject: (error: unknown) => void;
}

interface Running {
  controller: AbortController;
  settled: Promise<void>;
}

const MAX_RESERVE = 100;
const MAX_ACKS = 1000;

export class Worker<P = unknown> {
  readonly queue: Queue;
  readonly stats: WorkerStats = { reserved: 0, completed: 0, retried: 0, deadLettered: 0, cancelled: 0, lost: 0, timedOut: 0 };
  readonly #handler: Handler<P>;
  readonly #concurrency: number;
  readonly #visibility: number;
  readonly #extendEveryMs: number;
  readonly #wait: number;
  readonly #batchAcks: boolean;
  readonly #ackWindowMs: number;
  readonly #cancelGraceMs: number;
  readonly #onError: ((error: unknown, task: ReservedTask | undefined) => void) | undefined;
  readonly #running = new Set<Running>();
  #slotWaiter: (() => void) | undefined;
  #stopping = false;
  #loop: Promise<void> | undefined;
  #acks: PendingAck[] = [];
  #ackTimer: ReturnType<typeof setTimeout> | undefined;
  #stopped: Promise<void> | undefined;

  constructor(queue: Queue, handler: Handler<P>, options: WorkerOptions = {}) {
    this.queue = queue;
    this.#handler = handler;
    this.#concurrency = bounded("concurrency", options.concurrency ?? 1, 1, 1000, true);
    this.#visibility = bounded("visibilitySeconds", options.visibilitySeconds ?? 30, 0.1, 43_200, false);
    const every = options.extendEverySeconds ?? this.#visibility / 3;
    this.#extendEveryMs = bounded("extendEverySeconds", every, 0.05, this.#visibility, false) * 1000;
    this.#wait = bounded("waitSeconds", options.waitSeconds ?? 5, 0, 30, false);
    this.#batchAcks = options.batchAcks ?? this.#concurrency > 1;
    this.#ackWindowMs = bounded("ackWindowMs", options.ackWindowMs ?? 5, 0, 1000, false);
    this.#cancelGraceMs = bounded("cancelGraceMs", options.cancelGraceMs ?? 5000, 0, 3_600_000, false);
    this.#onError = options.onError;
    options.signal?.addEventListener("abort", () => void this.stop().catch(() => undefined), { once: true });
  }

  /** Handlers running now. */
  get running(): number {
    return this.#running.size;
  }

  /**
   * Starts reserving and running tasks; returns a promise that settles when the worker has
   * stopped (it rejects when the gateway refuses the worker for good: a bad token, a queue out
   * of the token's scope).
   */
  start(): Promise<void> {
    if (this.#loop === undefined) this.#loop = this.#reserveLoop();
    return this.#loop;
  }

  /**
   * Stops: no new reservations (a long poll in flight is awaited and what it brings is run),
   * then waits up to `graceMs` (default 30,000) for the running handlers; the ones still running
   * get their signal aborted (`WorkerStoppedError`) and, past `cancelGraceMs`, their tasks are
   * given back with a nack. Resolves when nothing runs.
   */
  stop(options: { graceMs?: number } = {}): Promise<void> {
    if (this.#stopped === undefined) this.#stopped = this.#stop(options.graceMs ?? 30_000);
    return this.#stopped;
  }

  async #stop(graceMs: number): Promise<void> {
    this.#stopping = true;
    this.#slotWaiter?.();
    await this.#loop?.catch(() => undefined);
    const all = (): Promise<void> => Promise.all([...this.#running].map((r) => r.settled)).then(() => undefined);
    if (this.#running.size > 0) {
      const timer = new AbortController();
      await Promise.race([all(), sleep(graceMs, timer.signal).catch(() => undefined)]);
      timer.abort();
      for (const r of this.#running) r.controller.abort(new WorkerStoppedError("the worker is stopping"));
      await all();
    }
    await this.#flushAcks();
  }

  async #reserveLoop(): Promise<void> {
    let backoff = 0;
    while (!this.#stopping) {
      while (this.#running.size >= this.#concurrency && !this.#stopping) {
        await new Promise<void>((resolve) => (this.#slotWaiter = resolve));
        this.#slotWaiter = undefined;
      }
      if (this.#stopping) break;
      const free = Math.min(MAX_RESERVE, this.#concurrency - this.#running.size);
      let tasks: ReservedTask[];
      try {
        tasks = await this.queue.reserve({ max: free, visibility_seconds: this.#visibility, wait_seconds: this.#wait });
        backoff = 0;
      } catch (error) {
        if (error instanceof SwitchyardError && !error.retryable) throw error;
        this.#onError?.(error, undefined);
        backoff = Math.min(5000, Math.max(100, backoff * 2));
        await sleep(backoff);
        continue;
      }
      for (const task of tasks) this.#spawn(task);
    }
  }

  #spawn(task: ReservedTask): void {
    this.stats.reserved++;
    const controller = new AbortController();
    const running: Running = { controller, settled: Promise.resolve() };
    this.#running.add(running);
    running.settled = this.#run(task, controller)
      .catch((error: unknown) => this.#onError?.(error, task))
      .finally(() => {
        this.#running.delete(running);
        this.#slotWaiter?.();
      });
  }

  async #run(task: ReservedTask, controller: AbortController): Promise<void> {
    const receipt = task.receipt;
    if (task.malformed) {
      await this.#end(task, () => this.queue.fail(receipt, `not a task envelope: ${task.malformed}`));
      this.stats.deadLettered++;
      return;
    }
    const stopOn = (error: unknown): boolean => {
      if (error instanceof TaskCancelledError || error instanceof ReceiptLostError || isTimedOut(error)) {
        controller.abort(isTimedOut(error) ? new TaskTimeoutError((error as Error).message) : error);
        return true;
      }
      return false;
    };
    const extender = setInterval(() => {
      this.queue.extend(receipt, this.#visibility, { signal: controller.signal }).catch((error: unknown) => {
        if (!stopOn(error) && !controller.signal.aborted) this.#onError?.(error, task);
      });
    }, this.#extendEveryMs);
    let deadlineTimer: ReturnType<typeof setTimeout> | undefined;
    if (typeof task.deadline === "number") {
      const ms = Math.max(0, task.deadline * 1000 - Date.now());
      deadlineTimer = setTimeout(() => controller.abort(new TaskTimeoutError(`the task's deadline passed (attempt ${task.attempt})`)), ms);
    }
    const context: TaskContext<P> = {
      id: task.id ?? null,
      receipt,
      payload: task.payload as P,
      attempt: task.attempt,
      maxAttempts: task.max_attempts,
      priority: task.priority,
      lastError: task.last_error,
      deadline: task.deadline,
      signal: controller.signal,
      reservation: task,
      progress: async (value: Json) => {
        try {
          await this.queue.progress(receipt, value);
        } catch (error) {
          stopOn(error);
          throw error;
        }
      },
    };
    let outcome: { ok: true; value: Json | undefined } | { ok: false; error: unknown };
    try {
      const value = await settleOrAbandon(Promise.resolve().then(() => this.#handler(context)), controller.signal, this.#cancelGraceMs);
      // Checked here, so that one handler's value that JSON cannot carry (a BigInt, a cycle)
      // fails its own task instead of the batch of acks it would travel in.
      if (value !== undefined) JSON.stringify(value, rejectBigInt);
      outcome = { ok: true, value: value === undefined ? undefined : (value as Json) };
    } catch (error) {
      outcome = { ok: false, error };
    } finally {
      clearInterval(extender);
      if (deadlineTimer !== undefined) clearTimeout(deadlineTimer);
    }

    if (controller.signal.aborted) {
      const reason: unknown = controller.signal.reason;
      if (reason instanceof TaskCancelledError) {
        // The backend ends a cancelled task when its holder gives it back (the release is
        // answered 409 `cancelled`); otherwise it would wait for the reservation to lapse.
        await this.queue.nack(receipt, { reason: "cancelled" }).catch(() => undefined);
        this.stats.cancelled++;
        return;
      }
      if (reason instanceof ReceiptLostError) {
        this.stats.lost++;
        this.#onError?.(reason, task);
        return;
      }
      // A timeout or a stop: give the task back now rather than when its reservation lapses.
      if (reason instanceof TaskTimeoutError) this.stats.timedOut++;
      const why = reason instanceof Error ? reason.message : String(reason);
      await this.#nack(task, why, undefined);
      return;
    }
    if (outcome.ok) {
      await this.#complete(task, outcome.value);
      return;
    }
    const error = outcome.error;
    this.#onError?.(error, task);
    if (error instanceof FailTask) {
      if (await this.#end(task, () => this.queue.fail(receipt, error.message))) this.stats.deadLettered++;
      return;
    }
    const delay = error instanceof RetryTask ? error.delaySeconds : undefined;
    await this.#nack(task, describe(error), delay);
  }

  async #complete(task: ReservedTask, result: Json | undefined): Promise<void> {
    let outcome: AckOutcome;
    try {
      outcome = await (this.#batchAcks ? this.#ackBatched(task.receipt, result) : this.#ackSingle(task.receipt, result));
    } catch (error) {
      // No answer, even after retries: the ack may or may not have landed.
      this.#onError?.(error, task);
      return;
    }
    if (outcome.ok) {
      this.stats.completed++;
      return;
    }
    if (outcome.status === 413) {
      const message = outcome.message ?? "result too large";
      this.#onError?.(new TooLargeError(message, { status: 413, code: outcome.error ?? "result_too_large" }), task);
      if (await this.#end(task, () => this.queue.fail(task.receipt, message))) this.stats.deadLettered++;
      return;
    }
    if (outcome.error === "cancelled") this.stats.cancelled++;
    else if (outcome.error === "receipt_not_current") this.stats.lost++;
    else this.#onError?.(new SwitchyardError(`ack: ${outcome.error ?? "failed"}: ${outcome.message ?? ""}`, { status: outcome.status ?? 0, code: outcome.error ?? "ack_failed" }), task);
  }

  async #nack(task: ReservedTask, reason: string, delaySeconds: number | undefined): Promise<void> {
    let deadLettered = false;
    const ended = await this.#end(task, async () => {
      const nacked = await this.queue.nack(task.receipt, {
        reason: reason.slice(0, 4096),
        ...(delaySeconds === undefined ? {} : { delay_seconds: delaySeconds }),
      });
      deadLettered = nacked.dead_lettered;
    });
    if (!ended) return;
    if (deadLettered) this.stats.deadLettered++;
    else this.stats.retried++;
  }

  /**
   * Sends an end (fail, nack) with `resend`. Returns false when the end was refused (cancelled,
   * lost, timed out) or could not be sent.
   */
  async #end(task: ReservedTask, send: () => Promise<void>): Promise<boolean> {
    try {
      await resend(send);
      return true;
    } catch (error) {
      this.#classifyLoss(error, task);
      return false;
    }
  }

  #classifyLoss(error: unknown, task: ReservedTask): void {
    if (error instanceof TaskCancelledError) this.stats.cancelled++;
    else if (error instanceof ReceiptLostError) this.stats.lost++;
    else if (isTimedOut(error)) this.stats.timedOut++;
    else this.#onError?.(error, task);
  }

  /** One ack, resent while no answer comes; a refusal is an outcome, as in a batch. */
  async #ackSingle(receipt: string, result: Json | undefined): Promise<AckOutcome> {
    try {
      await resend(() => this.queue.ack(receipt, result));
      return { ok: true, receipt };
    } catch (error) {
      if (error instanceof SwitchyardError && error.status !== 0) {
        return { ok: false, receipt, status: error.status, error: error.code, message: error.message };
      }
      throw error;
    }
  }

  /** An ack that waits up to `ackWindowMs` for others and goes with them in one `ackMany`. */
  #ackBatched(receipt: string, result: Json | undefined): Promise<AckOutcome> {
    return new Promise<AckOutcome>((resolve, reject) => {
      this.#acks.push({ receipt, result, resolve, reject });
      if (this.#acks.length >= MAX_ACKS || this.#acks.length >= this.#concurrency) {
        void this.#flushAcks();
      } else if (this.#ackTimer === undefined) {
        this.#ackTimer = setTimeout(() => void this.#flushAcks(), this.#ackWindowMs);
      }
    });
  }

  async #flushAcks(): Promise<void> {
    if (this.#ackTimer !== undefined) {
      clearTimeout(this.#ackTimer);
      this.#ackTimer = undefined;
    }
    while (this.#acks.length > 0) {
      const batch = this.#acks.splice(0, MAX_ACKS);
      const items = batch.map((a) => (a.result === undefined ? { receipt: a.receipt } : { receipt: a.receipt, result: a.result }));
      let answer: AckOutcome[] | undefined;
      let failure: unknown;
      try {
        answer = (await resend(() => this.queue.ackMany(items))).results;
      } catch (error) {
        failure = error;
      }
      // Sent again on its own: every ack of a batch refused 413 (the results together are over
      // the gateway's body limit, so only a result over it by itself is refused, and its task
      // failed), and an ack whose outcome is 503 (a backend that did not answer: it may or may
      // not have landed, and a receipt ends one delivery only).
      const tooLarge = failure instanceof TooLargeError;
      await Promise.all(
        batch.map(async (a, i) => {
          const outcome = answer?.[i];
          if (tooLarge || outcome?.status === 503) await this.#ackSingle(a.receipt, a.result).then(a.resolve, a.reject);
          else if (outcome) a.resolve(outcome);
          else a.reject(failure ?? new Error("the gateway answered fewer outcomes than acks"));
        }),
      );
    }
  }
}

/**
 * Sends a request that ends deliveries, sending it again (up to four times in all, backing off)
 * while no answer comes or the gateway is unavailable: resending is safe, since a receipt ends
 * one delivery only. Throws the last error.
 */
async function resend<T>(send: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await send();
    } catch (error) {
      if (!(error instanceof SwitchyardError && error.retryable) || attempt >= 4) throw error;
      await sleep(100 * 2 ** attempt);
    }
  }
}

/** A `JSON.stringify` replacer that names the value JSON cannot carry. */
function rejectBigInt(_key: string, value: unknown): unknown {
  if (typeof value === "bigint") throw new TypeError("the handler returned a BigInt, which JSON cannot carry");
  return value;
}

/** Waits for `work`; once `signal` aborts, waits at most `graceMs` more, then gives up on it. */
function settleOrAbandon<T>(work: Promise<T>, signal: AbortSignal, graceMs: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const onAbort = (): void => {
      timer = setTimeout(() => reject(signal.reason), graceMs);
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
    work.then(
      (value) => {
        if (timer !== undefined) clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        if (timer !== undefined) clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

function isTimedOut(error: unknown): boolean {
  return error instanceof ConflictError && error.code === "timed_out";
}

function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  if (isAbort(error)) return "aborted";
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}

function bounded(name: string, value: number, min: number, max: number, integer: boolean): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < min || value > max || (integer && !Number.isInteger(value))) {
    throw new RangeError(`${name} must be ${integer ? "an integer" : "a number"} in ${min}..=${max}, got ${String(value)}`);
  }
  return value;
}
