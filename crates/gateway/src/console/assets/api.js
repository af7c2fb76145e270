// The gateway's /v1 API as the console uses it, the token kept for this tab only, and a tiny
// DOM builder (text is always set as text, never parsed as HTML).

const TOKEN_KEY = "switchyard.token";

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(secret) {
  if (secret) sessionStorage.setItem(TOKEN_KEY, secret);
  else sessionStorage.removeItem(TOKEN_KEY);
}

/** Thrown when the gateway wants a (different) token: the shell then shows the token form. */
export class NeedToken extends Error {}

/** An error answer of the gateway: its status, code and message. */
export class ApiError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.code = body && body.error;
    this.body = body;
  }
}

/** A JSON request; 401 becomes NeedToken, other errors ApiError. */
export async function api(method, path, body) {
  const headers = { accept: "application/json" };
  const secret = token();
  if (secret) headers.authorization = `Bearer ${secret}`;
  if (body !== undefined) headers["content-type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
  });
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = { message: text };
  }
  if (response.status === 401) throw new NeedToken(json && json.message);
  if (!response.ok) throw new ApiError(response.status, json);
  return json;
}

/** `?a=1&b=2` from the entries whose value is a non-empty string. */
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : "";
}

export const enc = encodeURIComponent;

/** h("a", {href: "#"}, "text", child): an element; `on*` attributes become listeners. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** A notice for an error, telling 403 apart (the token's scope) from the rest. */
export function errorNotice(e) {
  const text = e instanceof ApiError && e.status === 403
    ? `Not allowed with this token: ${e.message}`
    : `Error: ${e.message}`;
  return h("p", { class: "notice error", role: "alert" }, text);
}

/** Repeats `work` every `ms` until the returned stop function is called. */
export function every(ms, work) {
  let stopped = false;
  let timer = null;
  const tick = async () => {
    if (stopped) return;
    try {
      await work();
    } finally {
      if (!stopped) timer = setTimeout(tick, ms);
    }
  };
  tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
