/**
 * Server-Sent Events over `fetch`: a parser that follows the WHATWG rules, and a follower that
 * reconnects with `Last-Event-ID` (the gateway replays exactly the events after it), watches the
 * heartbeats, and stops on the frames that end a subscription. It runs in Node and in browsers
 * (a `ReadableStream` body), and can carry a stream ticket instead of a token.
 */

import { NetworkError, SwitchyardError, UnauthorizedError } from "./errors.js";
import type { Query, Transport } from "./http.js";
import { anySignal, isAbort, sleep } from "./http.js";

/** One SSE message as sent: its `event:` name, its `data:` lines joined, its own `id:`. */
export interface SseMessage {
  readonly event: string;
  readonly data: string;
  /** The `id:` line of this message, if it had one. */
  readonly id: string | undefined;
}

/** Splits a text stream into messages; comments (`: heartbeat`) are counted, not returned. */
export class SseParser {
  #buffer = "";
  #event = "";
  #data: string[] = [];
  #id: string | undefined;
  #sawCR = false;
  /** Comment lines seen (the gateway's heartbeats). */
  comments = 0;

  /** Feeds decoded text; returns the messages it completed. */
  push(text: string): SseMessage[] {
    const out: SseMessage[] = [];
    // An empty chunk (a decoder holding half a character) must not forget a CR that ended the
    // previous one.
    if (text === "") return out;
    let chunk = text;
    // A CR ending the previous chunk and an LF starting this one are one line break.
    if (this.#sawCR && chunk.startsWith("\n")) chunk = chunk.slice(1);
    this.#sawCR = chunk.endsWith("\r");
    this.#buffer += chunk;
    let start = 0;
    for (let i = 0; i < this.#buffer.length; i++) {
      const c = this.#buffer.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      const line = this.#buffer.slice(start, i);
      if (c === 13 && this.#buffer.charCodeAt(i + 1) === 10) i++;
      start = i + 1;
      this.#line(line, out);
    }
    this.#buffer = this.#buffer.slice(start);
    return out;
  }

  #line(line: string, out: SseMessage[]): void {
    if (line === "") {
      if (this.#data.length > 0 || this.#event !== "" || this.#id !== undefined) {
        out.push({ event: this.#event === "" ? "message" : this.#event, data: this.#data.join("\n"), id: this.#id });
      }
      this.#event = "";
      this.#data = [];
      this.#id = undefined;
      return;
    }
    if (line.startsWith(":")) {
      this.comments++;
      return;
    }
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "event":
        this.#event = value;
        break;
      case "data":
        this.#data.push(value);
        break;
      case "id":
        if (!value.includes("\u0000")) this.#id = value;
        break;
      default:
        break;
    }
  }
}

/** How a follower reconnects. */
export interface ReconnectOptions {
  /** First wait before reconnecting, in ms (default 250); doubles up to `maxDelayMs`. */
  initialDelayMs?: number | undefined;
  /** Longest wait between attempts, in ms (default 5,000). */
  maxDelayMs?: number | undefined;
  /**
   * Failed attempts in a row before the follower gives up and throws the last error (default
   * unlimited: it follows until `signal` aborts or the stream ends).
   */
  maxAttempts?: number | undefined;
  /**
   * Milliseconds without a byte (events or heartbeats) after which the connection is taken for
   * dead and reopened (default 45,000: three of the gateway's 15-second heartbeats).
   */
  idleTimeoutMs?: number | undefined;
}

/** Options of every follower. */
export interface FollowOptions {
  /** Resume after this event id (the `id` of the last event you handled). */
  lastEventId?: string | undefined;
  /** Stops following (the iterator returns). */
  signal?: AbortSignal | undefined;
  /**
   * A stream ticket, or a function that gets one (`runs.streamTicket` on a server that holds the
   * token): sent as `?ticket=` without `Authorization`, so a browser page never holds the secret.
   * A function is called again when the gateway refuses an expired ticket.
   */
  ticket?: string | (() => string | Promise<string>) | undefined;
  reconnect?: ReconnectOptions | undefined;
  /** Called before each reconnect with why the connection ended. */
  onReconnect?: ((info: { attempt: number; lastEventId: string | undefined; error: unknown }) => void) | undefined;
}

/** What a follower's classifier makes of a message: a frame to yield, and whether it ends. */
export interface Classified<F> {
  frame: F | undefined;
  done: boolean;
}

/**
 * Follows an SSE route: yields what `classify` makes of each message, reconnecting with the last
 * id seen until a frame says the subscription is done, `signal` aborts, or reconnects run out.
 */
export async function* followSse<F>(
  transport: Transport,
  path: string,
  query: Query,
  options: FollowOptions,
  classify: (message: SseMessage) => Classified<F>,
): AsyncGenerator<F, void, undefined> {
  const initialDelay = options.reconnect?.initialDelayMs ?? 250;
  const maxDelay = options.reconnect?.maxDelayMs ?? 5_000;
  const maxAttempts = options.reconnect?.maxAttempts ?? Number.POSITIVE_INFINITY;
  const idleTimeout = options.reconnect?.idleTimeoutMs ?? 45_000;
  let lastEventId = options.lastEventId;
  let failures = 0;
  let ticket: string | undefined;
  // The gateway refused the last ticket: ask the provider for a new one, once. A second refusal
  // in a row (no event in between) is final, not a loop.
  let ticketRefused = false;
  let askedAgain = false;

  while (!options.signal?.aborted) {
    let error: unknown;
    let progressed = false;
    const connection = new AbortController();
    const signal = options.signal ? anySignal([options.signal, connection.signal]) : connection.signal;
    try {
      const q: Query = { ...query };
      let anonymous = false;
      if (options.ticket !== undefined) {
        if (ticket === undefined || ticketRefused) {
          ticket = typeof options.ticket === "string" ? options.ticket : await options.ticket();
          ticketRefused = false;
        }
        q["ticket"] = ticket;
        anonymous = true;
      }
      const headers: Record<string, string> = {};
      if (lastEventId !== undefined) headers["last-event-id"] = lastEventId;
      const response = await transport.stream(path, { query: q, headers, signal, anonymous });
      if (!response.body) throw new NetworkError(`GET ${path}: the response has no body`, { status: 0, code: "network" });
      const parser = new SseParser();
      const decoder = new TextDecoder();
      const reader = response.body.getReader();
      let idle: ReturnType<typeof setTimeout> | undefined;
      const arm = (): void => {
        if (idle !== undefined) clearTimeout(idle);
        idle = setTimeout(
          () => connection.abort(new NetworkError(`GET ${path}: nothing for ${idleTimeout} ms`, { status: 0, code: "idle" })),
          idleTimeout,
        );
      };
      arm();
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          arm();
          const messages = parser.push(decoder.decode(value, { stream: true }));
          if (messages.length > 0 || parser.comments > 0) {
            progressed = true;
            askedAgain = false;
          }
          for (const message of messages) {
            if (message.id !== undefined && message.id !== "") lastEventId = message.id;
            const { frame, done: finished } = classify(message);
            if (frame !== undefined) yield frame;
            if (finished) return;
          }
        }
      } finally {
        if (idle !== undefined) clearTimeout(idle);
        await reader.cancel().catch(() => undefined);
      }
      // The gateway closed the stream without an end (a drain or restart): reconnect.
      error = new NetworkError(`GET ${path}: the stream closed`, { status: 0, code: "closed" });
    } catch (caught) {
      if (options.signal?.aborted) return;
      error = connection.signal.aborted && isAbort(caught) ? connection.signal.reason : caught;
      if (error instanceof UnauthorizedError && options.ticket !== undefined && typeof options.ticket !== "string" && !askedAgain) {
        // An expired ticket: get a new one at once.
        ticketRefused = true;
        askedAgain = true;
        continue;
      }
      if (!(error instanceof SwitchyardError && error.retryable)) throw error;
    }
    if (progressed) failures = 0;
    failures++;
    if (failures > maxAttempts) throw error;
    options.onReconnect?.({ attempt: failures, lastEventId, error });
    const retryAfter = error instanceof SwitchyardError && error.retryAfter !== undefined ? error.retryAfter * 1000 : 0;
    const backoff = Math.min(maxDelay, initialDelay * 2 ** Math.min(failures - 1, 20));
    try {
      await sleep(Math.max(retryAfter, backoff), options.signal);
    } catch {
      return;
    }
  }
}
