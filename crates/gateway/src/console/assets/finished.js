// The queue page's finished tasks (ADR 0384): the latest end of each of the queue's recently
// ended tasks, read from its end-event log (`GET /v1/queues/{q}/events/page`) and filtered by
// state in the page. The log is read forward from the oldest kept event once, then only what
// ended since the last read; the page keeps the last KEPT tasks, so the filter works on those.
import { api, enc, h } from "/console/api.js";

/** Tasks the list keeps (their latest end each); older ones fall off as new ones end. */
export const KEPT = 200;
/** Events one request reads (the route's bound). */
const PAGE = 1000;
/** Requests one refresh makes at most, so a busy log is caught up over several refreshes. */
const PAGES_PER_REFRESH = 20;
const STATES = ["completed", "failed", "dead", "cancelled"];

/** Unix seconds as local time, or a dash. */
function when(t) {
  return typeof t === "number" ? new Date(t * 1000).toLocaleString() : "—";
}

/** What the end says beyond its state: the error, the inline result or its size. */
function detail(e) {
  if (e.error) return e.error;
  if (e.result_base64) return `result (not JSON, base64) ${e.result_base64}`;
  if (e.result != null) return `result ${JSON.stringify(e.result)}`;
  if (e.result_size) return `result of ${e.result_size} bytes (on the task's page)`;
  return "";
}

/**
 * The section and its refresh. `name` is the queue, `initial` the state filter from the URL
 * (`#/queue/<name>?finished=dead`), `fail` the console's error handler.
 */
export function finishedTasks(name, initial, fail) {
  const path = `/v1/queues/${enc(name)}`;
  const ended = new Map(); // task id -> its latest end event, oldest first
  let cursor = null;
  let gap = false;
  const list = h("div", { id: "finished", "aria-live": "polite" }, h("p", { class: "muted" }, "Loading…"));
  const summary = h("p", { id: "finished-summary", class: "muted" });
  const filter = h("select", { id: "finished-filter", onchange: () => {
    const q = filter.value ? `?finished=${enc(filter.value)}` : "";
    // The filter is kept in the address (so a reload or a shared link keeps it) without a
    // hashchange, which would rebuild the page.
    history.replaceState(null, "", `#/queue/${enc(name)}${q}`);
    render();
  } }, h("option", { value: "" }, "All ends"), STATES.map((s) => h("option", { value: s }, s)));
  filter.value = STATES.includes(initial) ? initial : "";
  const section = h("section", { "aria-label": "Finished tasks" },
    h("h2", {}, "Finished tasks"),
    h("form", { class: "inline", onsubmit: (e) => e.preventDefault() },
      h("label", { for: "finished-filter" }, "State", filter)),
    summary, list);

  let shown = null;
  function render() {
    const rows = [...ended.values()].reverse().filter((e) => !filter.value || e.state === filter.value);
    // Unchanged rows keep their elements, so a focused link keeps its focus across refreshes.
    const signature = `${filter.value}|${gap}|${ended.size}|${rows.map((e) => e.cursor).join(",")}`;
    if (signature === shown) return;
    shown = signature;
    const of = `${ended.size} task${ended.size === 1 ? "" : "s"} ended recently (the last ${KEPT} kept here)`;
    summary.textContent = `${filter.value ? `${rows.length} ${filter.value} of ` : ""}${of}${gap
      ? "; the queue's retention trimmed older ends" : ""}.`;
    if (!rows.length) {
      list.replaceChildren(h("p", { class: "muted" },
        filter.value ? `No ${filter.value} task among them.` : "No task has ended yet."));
      return;
    }
    list.replaceChildren(h("div", { class: "table" }, h("table", {},
      h("thead", {}, h("tr", {}, ["Task", "State", "Attempt", "Ended", "Error or result"]
        .map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows.map((e) => h("tr", { "data-task": e.task_id, "data-state": e.state },
        h("td", {}, h("a", { href: `#/task/${enc(name)}/${enc(e.task_id)}` }, e.task_id)),
        h("td", { class: `state status status-${e.state}` }, e.state),
        h("td", {}, e.attempt), h("td", {}, when(e.at)),
        h("td", { class: "detail" }, detail(e))))))));
  }

  async function refresh() {
    try {
      for (let i = 0; i < PAGES_PER_REFRESH; i += 1) {
        const after = cursor == null ? "" : `&after=${enc(cursor)}`;
        const page = await api("GET", `${path}/events/page?limit=${PAGE}${after}`);
        // A gap after the first read means ends were trimmed before this page saw them.
        if (page.gap && cursor != null) gap = true;
        for (const e of page.events) {
          ended.delete(e.task_id);
          ended.set(e.task_id, e);
        }
        while (ended.size > KEPT) ended.delete(ended.keys().next().value);
        cursor = page.cursor || cursor;
        if (page.events.length < PAGE) break;
      }
      render();
    } catch (err) {
      // The rest of the queue page goes on; only this section says what failed, until a
      // later read succeeds and draws the rows again.
      shown = null;
      fail(err, list);
    }
  }
  return { section, refresh };
}
