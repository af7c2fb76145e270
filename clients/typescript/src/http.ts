/** The transport every part of the client shares: one base URL, one token, `fetch`. */

import { NetworkError, SwitchyardError, errorFromResponse } from "./errors.js";

/** How to reach a gateway. */
export interface ClientOptions {
  /**
   * The gateway's address, e.g. `http://127.0.0.1:8080`, or the path an application mounted the
   * gateway's router at (`https://app.example/switchyard`).
   */
  baseUrl: string;
  /** A secret of the gateway's token file, sent as `Authorization: Bearer …`. */
  token?: string | undefined;
  /** The `fetch` to use (default: the global one: Node ≥ 20, browsers, Deno, Bun). */
  fetch?: typeof fetch | undefined;
  /**
   * Milliseconds a request may take before it is abandoned with a `NetworkError` (`timeout`);
   * long polls add the wait they asked for. Default 30,000, the gateway's own request deadline.
   */
  timeoutMs?: number | undefined;
  /** Headers sent with every request (a tracing header, a proxy's credentials). */
  headers?: Record<string, string> | undefined;
}

/** A query's values; `undefined` leaves the parameter out. */
export type Query = Record<string, string | number | boolean | undefined | null>;

/** One request. */
export interface RequestInit {
  query?: Query | undefined;
  /** A JSON body (`undefined`: none). */
  body?: unknown;
  /** Extra milliseconds on top of the client's timeout (long polls). */
  extraTimeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
  headers?: Record<string, string> | undefined;
  /** Leave `Authorization` out (a request carrying a stream ticket instead). */
  anonymous?: boolean | undefined;
}

const DEFAULT_TIMEOUT_MS = 30_000;

/** The shared HTTP layer: builds URLs, sends JSON, turns refusals into typed errors. */
export class Transport {
  readonly baseUrl: string;
  readonly #token: string | undefined;
  readonly #fetch: typeof fetch;
  readonly #timeoutMs: number;
  readonly #headers: Record<string, string>;

  constructor(options: ClientOptions) {
    if (typeof options.baseUrl !== "string" || !/^https?:\/\//.test(options.baseUrl)) {
      throw new TypeError(`baseUrl must be an http(s) URL, got ${JSON.stringify(options.baseUrl)}`);
    }
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.#token = options.token;
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") {
      throw new TypeError("no fetch: pass options.fetch (Node ≥ 20 and browsers have one)");
    }
    this.#fetch = f.bind(globalThis);
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#headers = { ...(options.headers ?? {}) };
  }

  /** Whether requests carry a bearer token. */
  get hasToken(): boolean {
    return this.#token !== undefined;
  }

  /** The absolute URL of `path` (already encoded) with `query`. */
  url(path: string, query?: Query): string {
    let url = this.baseUrl + path;
    if (query) {
      const params = new URLSearchParams();
      for (const [key, value] of Object.entries(query)) {
        if (value !== undefined && value !== null) params.append(key, String(value));
      }
      const text = params.toString();
      if (text !== "") url += `?${text}`;
    }
    return url;
  }

  /** Sends a request and reads its JSON answer; any non-2XX answer throws its typed error. */
  async json<T>(method: string, path: string, init: RequestInit = {}): Promise<T> {
    const { response, what, finish } = await this.#open(method, path, init, false);
    let text: string;
    try {
      text = await response.text();
    } catch (cause) {
      throw finish(cause);
    }
    finish();
    if (text === "") return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch (cause) {
      throw new SwitchyardError(`${what}: the gateway answered ${response.status} with a body that is not JSON`, {
        status: response.status,
        code: "malformed_response",
        requestId: response.headers.get("x-request-id") ?? undefined,
        cause,
      });
    }
  }

  /**
   * Sends a request and returns the response once its head arrived: a stream's body is read by
   * the caller, without the request timeout, until `init.signal` aborts it.
   */
  async stream(path: string, init: RequestInit): Promise<Response> {
    const { response, finish } = await this.#open("GET", path, init, true);
    finish();
    return response;
  }

  async #open(
    method: string,
    path: string,
    init: RequestInit,
    streaming: boolean,
  ): Promise<{ response: Response; what: string; finish: (cause?: unknown) => NetworkError }> {
    const headers: Record<string, string> = {
      accept: streaming ? "text/event-stream" : "application/json",
      ...this.#headers,
      ...(init.headers ?? {}),
    };
    if (this.#token !== undefined && !init.anonymous) headers["authorization"] = `Bearer ${this.#token}`;
    let body: string | undefined;
    if (init.body !== undefined) body = JSON.stringify(init.body);
    // The gateway takes writes only as JSON, an empty body included: a browser page cannot
    // send that type cross-site without CORS.
    if (method !== "GET" && method !== "HEAD") headers["content-type"] = "application/json";
    const what = `${method} ${path}`;
    const timeoutMs = this.#timeoutMs + (init.extraTimeoutMs ?? 0);
    // The timeout covers the whole of a JSON request, and only the head of a stream.
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(new DOMException("timed out", "TimeoutError")), timeoutMs);
    const signal = init.signal ? anySignal([init.signal, timeout.signal]) : timeout.signal;
    const finish = (cause?: unknown): NetworkError => {
      clearTimeout(timer);
      return networkError(what, cause, timeout.signal.aborted, timeoutMs);
    };
    let response: Response;
    try {
      response = await this.#fetch(this.url(path, init.query), { method, headers, body, signal });
    } catch (cause) {
      throw finish(cause);
    }
    if (response.ok) return { response, what, finish };
    let text = "";
    try {
      text = await response.text();
    } catch {
      text = "";
    }
    finish();
    throw errorFromResponse(response.status, response.headers, text, what);
  }
}

/** Encodes one path segment (a run id, a queue, a receipt). */
export function seg(value: string): string {
  return encodeURIComponent(value);
}

function networkError(what: string, cause: unknown, timedOut: boolean, timeoutMs: number): NetworkError {
  if (timedOut) {
    return new NetworkError(`${what}: no answer within ${timeoutMs} ms`, { status: 0, code: "timeout", cause });
  }
  if (isAbort(cause)) {
    return new NetworkError(`${what}: aborted`, { status: 0, code: "aborted", cause });
  }
  const detail = cause instanceof Error ? (cause.cause instanceof Error ? cause.cause.message : cause.message) : String(cause);
  return new NetworkError(`${what}: ${detail}`, { status: 0, code: "network", cause });
}

/** Whether `error` is the rejection of an aborted fetch or wait. */
export function isAbort(error: unknown): boolean {
  return error instanceof Error && (error.name === "AbortError" || error.name === "TimeoutError");
}

/** A signal aborted when any of `signals` is (`AbortSignal.any` where the platform has it). */
export function anySignal(signals: AbortSignal[]): AbortSignal {
  const any = (AbortSignal as unknown as { any?: (s: AbortSignal[]) => AbortSignal }).any;
  if (typeof any === "function") return any(signals);
  const controller = new AbortController();
  for (const s of signals) {
    if (s.aborted) {
      controller.abort(s.reason);
      break;
    }
    s.addEventListener("abort", () => controller.abort(s.reason), { once: true });
  }
  return controller.signal;
}

/** Waits `ms`, or rejects when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
