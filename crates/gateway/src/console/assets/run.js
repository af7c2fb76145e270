// `#/run/<id>?session=&namespace=`: one run's timeline, read from the store and then followed
// live over EventSource. The browser reconnects by itself with Last-Event-ID; when the stream
// cannot go on (a gap, an expired ticket, a restarted gateway) the page reads the rest from the
// store and opens a new stream. Events are keyed by seq, so none is shown twice. While the run
// is open a form cancels it (ADR 0396); when it has a session, the runs waiting for that session
// are listed with a button that takes one out of the line (ADR 0394).
import { api, enc, every, h, query, token } from "/console/api.js";

const KINDS = ["run.started", "run.completed", "run.failed", "run.paused", "run.resumed",
  "run.cancelled", "run.interrupted", "control.requested", "control.observed", "text.delta",
  "thought.delta", "message.completed", "tool.call.started", "tool.call.completed", "node.updated",
  "artifact.created", "usage.reported", "input.appended", "status.reported", "progress.reported",
  "custom"];

const STATUS_OF = { "run.started": "running", "run.resumed": "running", "run.paused": "paused",
  "run.interrupted": "waiting_human", "run.completed": "completed", "run.failed": "failed",
  "run.cancelled": "cancelled" };

const TERMINAL = ["completed", "failed", "cancelled"];

const json = (v) => JSON.stringify(v, null, 2);

/** What a cancel did, in words, from the gateway's answer. */
function cancelOutcome(r) {
  if (r.outcome === "ended") return "Cancelled: the run ended now.";
  if (r.outcome === "left_line") return "Taken out of its session's line: it will not start.";
  if (r.outcome === "finished") return `It had already ended (${r.status}); nothing changed.`;
  const by = typeof r.ends_by === "number" ? ` by ${new Date(r.ends_by * 1000).toLocaleTimeString()}` : "";
  return `Cancel requested: the worker is told, and the run ends cancelled when it confirms, or${by} at the latest.`;
}

export async function runView({ main, params, fail }, runId) {
  const session = params.get("session") || "";
  const namespace = params.get("namespace") || "";
  const addr = query({ session, namespace });
  const base = `/v1/runs/${enc(runId)}`;
  let lastSeq = -1;
  let status = "";
  let source = null;
  let stopped = false;
  let retry = null;
  let failures = 0;
  // A form the operator typed into or submitted stays until they leave the page, with the
  // gateway's answer: another tab resuming the run first must not make their input vanish.
  let formTouched = false;
  const messages = new Map();
  const tools = new Map();

  const statusEl = h("span", { id: "run-status", class: "status" });
  const liveEl = h("span", { id: "live", class: "muted" });
  const usageEl = h("p", { id: "usage", class: "muted" });
  const list = h("ol", { class: "timeline", id: "timeline", "aria-live": "polite" });
  const resumeBox = h("div", { id: "resume" });
  const cancelBox = h("section", { id: "cancel", "aria-label": "Cancel the run" });
  const lineBox = h("section", { id: "line", "aria-label": "Runs waiting for the session" });
  main.replaceChildren(
    h("p", {}, h("a", { href: `#/runs${query({ namespace })}` }, "← Runs")),
    h("h1", {}, "Run ", h("code", { id: "run-id" }, runId)),
    h("p", {}, "Status: ", statusEl, " ", liveEl),
    usageEl, cancelBox, resumeBox, lineBox, list);

  function setStatus(s) {
    status = s;
    statusEl.textContent = s;
    statusEl.className = `status status-${s}`;
    // An ended run has nothing to cancel; the last answer stays beside the hidden form.
    cancelForm.hidden = TERMINAL.includes(s);
  }

  const cancelReason = h("input", { id: "cancel-reason", name: "reason", placeholder: "(optional)" });
  const cancelGrace = h("input", { id: "cancel-grace", name: "grace_secs", type: "number", min: 0, max: 3600, placeholder: "30", inputmode: "numeric" });
  const cancelOut = h("p", { id: "cancel-result", role: "status" });
  const cancelButton = h("button", { type: "submit", id: "cancel-run" }, "Cancel run");
  const cancelForm = h("form", { class: "inline", id: "cancel-form", onsubmit: async (e) => {
    e.preventDefault();
    cancelButton.disabled = true;
    const body = {};
    if (cancelReason.value.trim()) body.reason = cancelReason.value.trim();
    // Left empty, the gateway's default grace period applies.
    if (cancelGrace.value !== "") body.grace_secs = Number(cancelGrace.value);
    try {
      const r = await api("POST", `${base}/cancel${addr}`, body);
      cancelOut.textContent = cancelOutcome(r);
      cancelOut.className = "notice";
      if (r.status) setStatus(r.status);
    } catch (err) {
      if (err.status === undefined) return fail(err);
      cancelOut.textContent = `Not cancelled: ${err.message}`;
      cancelOut.className = "notice error";
    } finally {
      cancelButton.disabled = false;
    }
  } },
    h("label", { for: "cancel-reason" }, "Reason", cancelReason),
    h("label", { for: "cancel-grace" }, "Grace (seconds)", cancelGrace),
    cancelButton);
  cancelBox.replaceChildren(cancelForm, cancelOut);

  /** The session's line, refreshed with the page; each entry can be taken out. */
  function followLine(lineSession) {
    const body = h("div", { id: "line-runs", "aria-live": "polite" }, h("p", { class: "muted" }, "Loading…"));
    const out = h("p", { id: "line-result", role: "status" });
    lineBox.replaceChildren(h("h2", {}, "Waiting for session ", h("code", {}, lineSession)), out, body);
    const path = `/v1/sessions/${enc(lineSession)}/line${query({ namespace })}`;
    let shown = null;
    async function refresh() {
      const line = await api("GET", path);
      const runs = line.runs || [];
      // Unchanged rows keep their elements, so a focused button keeps its focus across refreshes.
      const signature = JSON.stringify(runs);
      if (signature === shown) return;
      shown = signature;
      if (!runs.length) {
        body.replaceChildren(h("p", { class: "muted" }, "No run waits for this session."));
        return;
      }
      body.replaceChildren(h("div", { class: "table" }, h("table", {},
        h("thead", {}, h("tr", {}, ["Position", "Run", "Invocable", ""].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, runs.map((r) => h("tr", { "data-line-run": r.run_id },
          h("td", { class: "position" }, r.position),
          h("td", {}, h("a", { href: `#/run/${enc(r.run_id)}${query({ session: lineSession, namespace })}` }, r.run_id)),
          h("td", { class: "invocable" }, r.invocable),
          h("td", {}, h("button", { type: "button", class: "quiet leave-line", "aria-label": `Remove ${r.run_id} from the line`, onclick: async (e) => {
            e.target.disabled = true;
            try {
              await api("DELETE", `/v1/runs/${enc(r.run_id)}/turn${query({ session: lineSession, namespace })}`, {});
              out.textContent = `Removed ${r.run_id} from the line: it will not start.`;
              out.className = "notice";
            } catch (err) {
              if (err.status === undefined) return fail(err);
              // `not_waiting`: it started or was taken out meanwhile; the refresh shows which.
              out.textContent = `Not removed: ${err.message}`;
              out.className = "notice error";
            }
            shown = null;
            await refresh().catch((err) => fail(err, body));
          } }, "Remove from line"))))))));
    }
    return every(2000, async () => {
      try {
        await refresh();
      } catch (e) {
        shown = null;
        fail(e, body);
      }
    });
  }
  let stopLine = () => {};

  function item(ev, ...children) {
    return h("li", { "data-seq": ev.seq, "data-kind": ev.kind }, h("div", { class: "kind" }, `#${ev.seq} ${ev.kind}`), ...children);
  }

  function showUsage(u) {
    if (!u) return;
    const usd = u.usd === null || u.usd === undefined ? "" : `, $${u.usd}`;
    usageEl.textContent = `Usage: ${u.input_tokens} input tokens, ${u.output_tokens} output tokens${usd}`;
  }

  function resumeForm(p) {
    const reason = h("input", { id: "resume-reason", name: "reason", value: "approved", required: true });
    const value = h("textarea", { id: "resume-value", name: "value" });
    const out = h("p", { id: "resume-result", role: "status" });
    const button = h("button", { type: "submit", id: "resume-submit" }, "Resume");
    const form = h("form", { class: "inline", id: "resume-form", oninput: () => { formTouched = true; }, onsubmit: async (e) => {
      e.preventDefault();
      formTouched = true;
      button.disabled = true;
      try {
        await api("POST", `${base}/resume${addr}`, {
          reason: reason.value,
          value: [{ type: "text", text: value.value }],
        });
        out.textContent = "Resumed.";
        out.className = "notice";
      } catch (err) {
        if (err.status === undefined) return fail(err);
        out.textContent = err.code === "not_resumable"
          ? `Not resumed: ${err.message}` : `Error: ${err.message}`;
        out.className = "notice error";
        button.disabled = false;
      }
    } },
      h("label", { for: "resume-reason" }, "Reason", reason),
      h("label", { for: "resume-value" }, "Answer", value),
      button);
    resumeBox.replaceChildren(h("h2", {}, "Waiting for a human"),
      p && Object.keys(p).length ? h("pre", {}, json(p)) : null, form, out);
  }

  /** Adds one stored event, once. */
  function add(ev) {
    if (typeof ev.seq !== "number") return;
    if (ev.seq <= lastSeq) {
      // Counted, so a test can tell a Last-Event-ID resume (none) from a replay from the start.
      list.dataset.duplicates = String(Number(list.dataset.duplicates || 0) + 1);
      return;
    }
    lastSeq = ev.seq;
    const p = ev.payload || {};
    if (STATUS_OF[ev.kind]) setStatus(STATUS_OF[ev.kind]);
    if (ev.kind === "text.delta" || ev.kind === "thought.delta") {
      const key = `${ev.kind}:${p.message_id}`;
      let m = messages.get(key);
      if (!m) {
        m = h("div", { class: "message", "data-message-id": p.message_id || "" });
        messages.set(key, m);
        list.append(item(ev, ev.kind === "thought.delta" ? h("em", {}, "thinking") : null, m));
      }
      m.textContent += p.text || "";
    } else if (ev.kind === "tool.call.started") {
      const result = h("div", { class: "tool-result" });
      tools.set(p.call_id, result);
      list.append(item(ev, h("strong", {}, `Tool ${p.tool}`), h("pre", { class: "tool-args" }, json(p.args)), result));
    } else if (ev.kind === "tool.call.completed") {
      const preview = h("pre", { class: "tool-preview" }, p.result_preview);
      const size = h("span", { class: "muted" }, `result (${p.result_size} bytes)`);
      const into = tools.get(p.call_id);
      if (into) into.replaceChildren(size, preview);
      else list.append(item(ev, h("strong", {}, `Tool ${p.tool}`), size, preview));
    } else if (ev.kind === "run.interrupted") {
      list.append(item(ev, `Interrupted (${p.reason})`, Object.keys(p.payload || {}).length ? h("pre", {}, json(p.payload)) : null));
    } else if (ev.kind === "usage.reported") {
      showUsage(p.usage || p);
    } else if (ev.kind === "run.completed") {
      showUsage(p.usage);
      list.append(item(ev, "Completed", p.output ? h("pre", {}, json(p.output)) : null));
    } else if (ev.kind === "run.failed") {
      list.append(item(ev, `Failed: ${p.error_code}: ${p.message}`));
    } else {
      const rest = { ...p };
      delete rest.kind;
      list.append(item(ev, Object.keys(rest).length ? h("pre", {}, json(rest)) : null));
    }
    if (status === "waiting_human" && ev.kind === "run.interrupted") {
      formTouched = false;
      resumeForm(p.payload);
    } else if (status !== "waiting_human" && !formTouched) {
      resumeBox.replaceChildren();
    }
  }

  /** Reads the events after the last one shown from the store. */
  async function load() {
    const read = await api("GET", `${base}${query({ session, namespace, from_seq: String(lastSeq + 1) })}`);
    for (const ev of read.events || []) add(ev);
    if (read.status) setStatus(read.status);
    const lineSession = read.session_id || session;
    if (lineSession && !lineBox.hasChildNodes()) stopLine = followLine(lineSession);
  }

  async function open() {
    if (stopped || TERMINAL.includes(status)) {
      liveEl.textContent = "";
      return;
    }
    let url = `${base}/stream${addr}`;
    if (token()) {
      const t = await api("POST", "/v1/stream-tickets", { run_id: runId, session: session || undefined, namespace: namespace || undefined });
      url = `${base}/stream${query({ session, namespace, ticket: t.ticket })}`;
    }
    if (stopped) return;
    const es = new EventSource(url);
    list.dataset.streams = String(Number(list.dataset.streams || 0) + 1);
    source = es;
    liveEl.textContent = "connecting…";
    es.onopen = () => {
      failures = 0;
      liveEl.textContent = "live";
    };
    const onEvent = (e) => add(JSON.parse(e.data));
    for (const kind of KINDS) es.addEventListener(kind, onEvent);
    es.addEventListener("end", () => {
      es.close();
      liveEl.textContent = "";
      again(0);
    });
    es.addEventListener("gap", () => {
      // The stream no longer holds what we missed: read it from the store, then go on live.
      es.close();
      liveEl.textContent = "catching up…";
      again(0);
    });
    es.onerror = () => {
      if (es.readyState === EventSource.CLOSED) {
        // Refused (expired ticket, no stream here any more): read the store and start over.
        liveEl.textContent = "reconnecting…";
        again(Math.min(500 * 2 ** failures++, 10000));
      } else {
        liveEl.textContent = "reconnecting…";
      }
    };
  }

  function again(ms) {
    if (source) source.close();
    source = null;
    clearTimeout(retry);
    retry = setTimeout(async () => {
      try {
        await load();
        await open();
      } catch (e) {
        if (e.status === undefined && !(e instanceof TypeError)) return fail(e);
        liveEl.textContent = "reconnecting…";
        again(Math.min(500 * 2 ** failures++, 10000));
      }
    }, ms);
  }

  await load();
  await open();
  return () => {
    stopped = true;
    stopLine();
    clearTimeout(retry);
    if (source) source.close();
  };
}
