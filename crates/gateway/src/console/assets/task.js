// `#/task/<queue>/<id>`: one task by id (ADR 0380): its state, attempts, times, progress, last
// error and result, with a button that cancels it while it has not ended.
import { api, enc, every, h } from "/console/api.js";

const ENDS = ["completed", "failed", "dead", "cancelled"];

/** Unix seconds as local time, or a dash. */
function when(t) {
  return typeof t === "number" ? new Date(t * 1000).toLocaleString() : "—";
}

/** A stored document as text: its JSON, the base64 of bytes that are not JSON, or a dash. */
function doc(value, base64) {
  if (base64) return `(not JSON, base64) ${base64}`;
  return value == null ? "—" : JSON.stringify(value, null, 2);
}

export async function taskView({ main, fail }, queue, id) {
  const path = `/v1/queues/${enc(queue)}/tasks/${enc(id)}`;
  const state = h("b", { id: "t-state" }, "…");
  const fields = h("dl", { id: "task-fields", class: "fields" });
  const result = h("pre", { id: "t-result" }, "—");
  const progress = h("pre", { id: "t-progress" }, "—");
  const out = h("p", { id: "cancel-result", role: "status" });
  const cancel = h("button", { type: "button", id: "cancel-task", disabled: true, onclick: async () => {
    cancel.disabled = true;
    try {
      const r = await api("DELETE", path, {});
      out.textContent = r.outcome === "cancelled" ? "Cancelled: it had not started and never will."
        : r.outcome === "cancel_requested" ? "Cancel requested: its worker is told, and it ends cancelled."
          : `It had already ended (${r.state}); nothing changed.`;
      out.className = "notice";
      await refresh();
    } catch (err) {
      fail(err, out);
      cancel.disabled = false;
    }
  } }, "Cancel task");
  main.replaceChildren(
    h("p", {}, h("a", { href: `#/queue/${enc(queue)}` }, `← Queue ${queue}`)),
    h("h1", {}, "Task ", h("code", {}, id)),
    h("section", { class: "flow", "aria-label": "Task state" }, h("span", {}, "State: ", state), cancel),
    out, fields,
    h("h2", {}, "Progress"), progress,
    h("h2", {}, "Result"), result);

  async function refresh() {
    const t = await api("GET", path);
    let text = t.state;
    if (t.cancel_requested) text += " (cancel requested)";
    if (t.foreign) text += " (moved by a consumer without records)";
    state.textContent = text;
    state.className = `status status-${t.state}`;
    cancel.disabled = ENDS.includes(t.state) || t.cancel_requested;
    const row = (label, value, key) => [h("dt", {}, label), h("dd", { "data-field": key }, String(value))];
    fields.replaceChildren(
      ...row("Attempt", t.max_attempts ? `${t.attempt} of ${t.max_attempts}` : t.attempt, "attempt"),
      ...row("Priority", t.priority, "priority"),
      ...row("Submitted", when(t.submitted_at), "submitted_at"),
      ...row("Started", when(t.started_at), "started_at"),
      ...row("Finished", when(t.finished_at), "finished_at"),
      ...row("Visible until", when(t.visible_until), "visible_until"),
      ...row("Last error", t.last_error ?? "—", "last_error"));
    progress.textContent = doc(t.progress, t.progress_base64);
    result.textContent = doc(t.result, t.result_base64);
  }
  return every(2000, async () => {
    try {
      await refresh();
    } catch (e) {
      if (e.code === "no_task") {
        fields.replaceChildren();
        state.textContent = "unknown";
        cancel.disabled = true;
        out.textContent = `Queue ${queue} has no task ${id}: it was never submitted with this id, or the queue's retention removed its record.`;
        out.className = "notice error";
        return;
      }
      fail(e, out);
    }
  });
}
