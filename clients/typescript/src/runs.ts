/** Runs: start, append, resume, read, list, and follow a run's live stream. */

import type { Query, Transport } from "./http.js";
import { seg } from "./http.js";
import type { FollowOptions, SseMessage } from "./sse.js";
import { followSse } from "./sse.js";
import type {
  AppendBatch,
  AppendedEvents,
  CancelRun,
  CancelRunAnswer,
  Payload,
  Queued,
  ResumeRun,
  Resumed,
  RunEvent,
  RunList,
  RunStatus,
  RunTurn,
  RunView,
  SessionLine,
  StartRun,
  Started,
  Ticket,
} from "./types.js";

/** Where a run lives: runs with a session or a namespace are addressed with them. */
export interface RunAddress {
  session?: string | undefined;
  namespace?: string | undefined;
}

/** The `gap` frame's data: the cursor cannot be replayed; reload the run from the store. */
export interface StreamGap {
  code: string;
  run_id: string;
  requested_event_id: string | null;
  earliest_available_event_id: string;
  latest_available_event_id: string;
  recovery: string;
}

/** What following a run yields. */
export type RunFrame =
  /** A stored event, published with its kind as the SSE event name. */
  | { type: "event"; id: string; event: string; data: RunEvent }
  /** The stream cannot be continued without loss: read the run (`runs.get`) instead. Last frame. */
  | { type: "gap"; gap: StreamGap }
  /** The run finished: its last event came before. Last frame. */
  | { type: "end" };

export class Runs {
  readonly #t: Transport;

  constructor(transport: Transport) {
    this.#t = transport;
  }

  /**
   * Starts a run: claims its session (one open run per session; stale runs are closed) and
   * stores `run.started`. A busy session throws `ConflictError` (`session_busy`, `heldBy`).
   */
  start(request: StartRun, options: { signal?: AbortSignal } = {}): Promise<Started> {
    return this.#t.json("POST", "/v1/runs", { body: request, signal: options.signal });
  }

  /**
   * Claims a session with `request.multitask_strategy`: `"reject"` (as `start`), `"enqueue"` (on
   * a busy session the run waits in the session's line: the answer is `Queued`, `status`
   * `"pending"`, with its `position`; follow it with `turn`), `"interrupt"` or `"rollback"` (the
   * open run ends `cancelled`, listed in `ended`, before this one starts).
   */
  claim(request: StartRun, options: { signal?: AbortSignal } = {}): Promise<Started | Queued> {
    return this.#t.json("POST", "/v1/runs", { body: request, signal: options.signal });
  }

  /**
   * Where an enqueued run stands: `pending` with its `position`, or its status and `run.started`
   * once it started. `waitSecs` (at most 30) waits for the start.
   */
  turn(runId: string, options: RunAddress & { waitSecs?: number; signal?: AbortSignal } = {}): Promise<RunTurn> {
    return this.#t.json("POST", `/v1/runs/${seg(runId)}/turn`, {
      query: { ...address(options), wait_secs: options.waitSecs },
      signal: options.signal,
    });
  }

  /** Takes an enqueued run out of its session's line before it starts (`not_waiting` if it does not wait). */
  async leaveLine(runId: string, options: RunAddress & { signal?: AbortSignal } = {}): Promise<void> {
    await this.#t.json("DELETE", `/v1/runs/${seg(runId)}/turn`, { query: address(options), signal: options.signal });
  }

  /** The runs waiting for a session, the next to start first. */
  line(session: string, options: { namespace?: string; signal?: AbortSignal } = {}): Promise<SessionLine> {
    return this.#t.json("GET", `/v1/sessions/${seg(session)}/line`, {
      query: { namespace: options.namespace },
      signal: options.signal,
    });
  }

  /**
   * Cancels a run: its worker is told at once (`signals`), the named queue task is cancelled,
   * and the run ends `cancelled` when the worker confirms or when `grace_secs` (30) run out;
   * `grace_secs: 0` ends it now. A waiting run leaves its line; a finished one is left as it is.
   */
  cancel(runId: string, request: CancelRun = {}, options: RunAddress & { signal?: AbortSignal } = {}): Promise<CancelRunAnswer> {
    return this.#t.json("POST", `/v1/runs/${seg(runId)}/cancel`, {
      body: request,
      query: address(options),
      signal: options.signal,
    });
  }

  /**
   * Follows what a run's worker must act on: its `control.*` events (a cancel request) and its
   * end, live, reconnecting with the last event id as `follow` does.
   */
  signals(runId: string, options: RunAddress & FollowOptions = {}): AsyncGenerator<RunFrame, void, undefined> {
    return followSse(this.#t, `/v1/runs/${seg(runId)}/signals`, address(options), options, classifyRunMessage);
  }

  /**
   * Appends one payload, or a batch (stored atomically, in order, at most 1,000), to an open run;
   * each is published to the run's stream.
   */
  append(
    runId: string,
    events: Payload | Payload[],
    options: RunAddress & { origin?: string; signal?: AbortSignal } = {},
  ): Promise<AppendedEvents> {
    const body: Payload | AppendBatch = Array.isArray(events)
      ? { events, ...(options.origin === undefined ? {} : { origin: options.origin }) }
      : events;
    return this.#t.json("POST", `/v1/runs/${seg(runId)}/events`, {
      body,
      query: address(options),
      signal: options.signal,
    });
  }

  /** Resumes a waiting run: of concurrent resumes exactly one succeeds, the others throw `not_resumable`. */
  resume(runId: string, request: ResumeRun = {}, options: RunAddress & { signal?: AbortSignal } = {}): Promise<Resumed> {
    return this.#t.json("POST", `/v1/runs/${seg(runId)}/resume`, {
      body: request,
      query: address(options),
      signal: options.signal,
    });
  }

  /** A run's status and its events from `fromSeq` (default 0). */
  get(runId: string, options: RunAddress & { fromSeq?: number; signal?: AbortSignal } = {}): Promise<RunView> {
    return this.#t.json("GET", `/v1/runs/${seg(runId)}`, {
      query: { ...address(options), from_seq: options.fromSeq },
      signal: options.signal,
    });
  }

  /** The runs of a namespace (none: the runs without one), optionally of one status. */
  list(options: { namespace?: string; status?: RunStatus; signal?: AbortSignal } = {}): Promise<RunList> {
    return this.#t.json("GET", "/v1/runs", {
      query: { namespace: options.namespace, status: options.status },
      signal: options.signal,
    });
  }

  /**
   * A stream ticket for one run (gateways with tokens only): hand it to a browser page, which
   * follows the stream with `{ticket}` and never holds the token. It opens the stream,
   * reconnects included, for `expires_in` seconds.
   */
  streamTicket(runId: string, options: RunAddress & { signal?: AbortSignal } = {}): Promise<Ticket> {
    return this.#t.json("POST", "/v1/stream-tickets", {
      body: { run_id: runId, session: options.session, namespace: options.namespace },
      signal: options.signal,
    });
  }

  /**
   * Follows a run's live stream: every event, then `end` when the run finishes, or `gap` when
   * the cursor was trimmed. A dropped connection (a gateway restart, a network blip, a silent
   * peer) is reopened with the last event id, and the gateway replays exactly what came after it.
   *
   * ```ts
   * for await (const frame of client.runs.follow("run-1", { session: "s1" })) {
   *   if (frame.type === "event") console.log(frame.data.kind);
   * }
   * ```
   */
  follow(runId: string, options: RunAddress & FollowOptions = {}): AsyncGenerator<RunFrame, void, undefined> {
    return followSse(this.#t, `/v1/runs/${seg(runId)}/stream`, address(options), options, classifyRunMessage);
  }
}

function address(options: RunAddress): Query {
  return { session: options.session, namespace: options.namespace };
}

/** Frames with an id are events; `end` and `gap` carry none, and end the subscription. */
export function classifyRunMessage(message: SseMessage): { frame: RunFrame | undefined; done: boolean } {
  if (message.id === undefined || message.id === "") {
    if (message.event === "end") return { frame: { type: "end" }, done: true };
    if (message.event === "gap") return { frame: { type: "gap", gap: JSON.parse(message.data) as StreamGap }, done: true };
    return { frame: undefined, done: false };
  }
  return { frame: { type: "event", id: message.id, event: message.event, data: JSON.parse(message.data) as RunEvent }, done: false };
}
