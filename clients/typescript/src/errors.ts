/**
 * Errors as the gateway reports them: every refusal is JSON `{error, message, field?,
 * request_id}` (plus route-specific extras such as `held_by` or `limit`), and each class below
 * says what the caller can do about it.
 */

/** The body of a gateway error, with its route-specific extras. */
export interface ErrorBody {
  /** A stable code: `invalid_input`, `session_busy`, `receipt_not_current`, `unavailable`, … */
  readonly error: string;
  /** What went wrong and what to do next. */
  readonly message: string;
  /** The dotted path of the field at fault. */
  readonly field?: string;
  /** The id of the request, also in the gateway's log. */
  readonly request_id?: string;
  readonly [extra: string]: unknown;
}

/** Anything the gateway refused or failed, or a request that never got an answer. */
export class SwitchyardError extends Error {
  /** The HTTP status; 0 when no response came (network failure, timeout, abort). */
  readonly status: number;
  /** The gateway's stable code (`error`), or `network` / `timeout` / `aborted` without a response. */
  readonly code: string;
  /** The request id the gateway logged the error under (`x-request-id`). */
  readonly requestId: string | undefined;
  /** The field at fault, when the gateway names one. */
  readonly field: string | undefined;
  /** Seconds the gateway asks to wait before retrying (`Retry-After`). */
  readonly retryAfter: number | undefined;
  /** The whole error body, with its route-specific extras (`held_by`, `limit`, …). */
  readonly body: ErrorBody | undefined;

  constructor(
    message: string,
    init: {
      status: number;
      code: string;
      requestId?: string | undefined;
      field?: string | undefined;
      retryAfter?: number | undefined;
      body?: ErrorBody | undefined;
      cause?: unknown;
    },
  ) {
    super(message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.status = init.status;
    this.code = init.code;
    this.requestId = init.requestId;
    this.field = init.field;
    this.retryAfter = init.retryAfter;
    this.body = init.body;
  }

  /** Whether the same request may succeed later unchanged (a network failure, 429, 503). */
  get retryable(): boolean {
    return this.status === 0 || this.status === 429 || this.status === 503 || this.status === 502;
  }
}

/** No answer came: the connection failed, the request timed out or was aborted. */
export class NetworkError extends SwitchyardError {}

/** 400 or 422: the request is malformed or a field is invalid (`field` names it). Fix it. */
export class InvalidRequestError extends SwitchyardError {}

/** 401: no token, an unknown one, or an expired stream ticket. */
export class UnauthorizedError extends SwitchyardError {}

/** 403: the token lacks the right, or the namespace or queue is outside its scope. */
export class ForbiddenError extends SwitchyardError {}

/** 404: no such run, task, stream, schedule or route (`code` says which). */
export class NotFoundError extends SwitchyardError {}

/**
 * 409: the state forbids it: `session_busy` (`heldBy` names the open run), `not_resumable`,
 * `run_exists`, `task_exists`, `timed_out`, …
 */
export class ConflictError extends SwitchyardError {
  /** The open run holding the session, on `session_busy`. */
  get heldBy(): string | undefined {
    const held = this.body?.["held_by"];
    return typeof held === "string" ? held : undefined;
  }
}

/**
 * 409 `receipt_not_current`: the reservation lapsed and the task went back to the queue (or to
 * another worker). Stop working on it; its end is no longer this worker's to report.
 */
export class ReceiptLostError extends ConflictError {}

/** 409 `cancelled`: the task was cancelled. Stop; it ends `cancelled` and is not retried. */
export class TaskCancelledError extends ConflictError {}

/** 413: the body (or a task's result) is over the gateway's limit (`limit` in the body). */
export class TooLargeError extends SwitchyardError {}

/** 429 or 503: a limit was reached or a backend is unavailable; retry after `retryAfter`. */
export class UnavailableError extends SwitchyardError {}

/** Reads a JSON error answer into the class that says what to do about it. */
export function errorFromResponse(
  status: number,
  headers: Headers,
  text: string,
  what: string,
): SwitchyardError {
  let body: ErrorBody | undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    if (isErrorBody(parsed)) body = parsed;
  } catch {
    body = undefined;
  }
  const code = body?.error ?? `http_${status}`;
  const message = body?.message ?? (text.trim() === "" ? `HTTP ${status}` : text.trim().slice(0, 500));
  const retryHeader = headers.get("retry-after");
  const retryAfter = retryHeader !== null && /^\d+$/.test(retryHeader) ? Number(retryHeader) : undefined;
  const init = {
    status,
    code,
    requestId: body?.request_id ?? headers.get("x-request-id") ?? undefined,
    field: body?.field,
    retryAfter,
    body,
  };
  const full = `${what}: ${status} ${code}: ${message}`;
  switch (status) {
    case 400:
    case 422:
      return new InvalidRequestError(full, init);
    case 401:
      return new UnauthorizedError(full, init);
    case 403:
      return new ForbiddenError(full, init);
    case 404:
      return new NotFoundError(full, init);
    case 409:
      if (code === "receipt_not_current") return new ReceiptLostError(full, init);
      if (code === "cancelled") return new TaskCancelledError(full, init);
      return new ConflictError(full, init);
    case 413:
      return new TooLargeError(full, init);
    case 429:
    case 503:
      return new UnavailableError(full, init);
    default:
      return new SwitchyardError(full, init);
  }
}

function isErrorBody(value: unknown): value is ErrorBody {
  if (typeof value !== "object" || value === null) return false;
  const record = value as Record<string, unknown>;
  return typeof record["error"] === "string" && typeof record["message"] === "string";
}
