// `#/webhooks` and `#/webhooks/<id>` (ADR 0395): the subscriptions, a form that creates one
// (its secret is shown once, as the gateway answers it only then), and for the chosen one its
// delivery log, newest first, with a delete that asks again before it deletes.
import { api, enc, every, h } from "/console/api.js";

const EVENTS = ["run.completed", "run.failed", "run.cancelled", "task.completed", "task.failed",
  "task.dead", "task.cancelled"];

/** An RFC 3339 time as local time, or a dash. */
function when(t) {
  const d = typeof t === "string" ? new Date(t) : null;
  return d && !Number.isNaN(d.getTime()) ? d.toLocaleString() : "—";
}

/** `a, b` from a list, or `fallback` when there is none. */
const joined = (list, fallback) => (Array.isArray(list) && list.length ? list.join(", ") : fallback);

/** The words of a comma-separated field, trimmed, the empty ones left out. */
const words = (text) => text.split(",").map((w) => w.trim()).filter(Boolean);

const table = (head, rows) => h("div", { class: "table" }, h("table", {},
  h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col" }, c)))),
  h("tbody", {}, rows)));

function createForm(fail, created) {
  const url = h("input", { id: "wh-url", name: "url", type: "url", required: true, placeholder: "https://example.com/hook" });
  const events = EVENTS.map((e) => h("input", { type: "checkbox", name: "events", value: e, checked: e.startsWith("run.") }));
  const queues = h("input", { id: "wh-queues", name: "queues", placeholder: "(for task.* events)" });
  const namespaces = h("input", { id: "wh-namespaces", name: "namespaces", placeholder: "(every namespace)" });
  const out = h("div", { id: "wh-create-result", role: "status" });
  const button = h("button", { type: "submit", id: "wh-create" }, "Subscribe");
  const form = h("form", { class: "inline", id: "wh-form", onsubmit: async (e) => {
    e.preventDefault();
    button.disabled = true;
    const body = { url: url.value.trim(), events: events.filter((c) => c.checked).map((c) => c.value) };
    if (words(queues.value).length) body.queues = words(queues.value);
    // Left empty, `namespaces` is left out: the gateway then delivers run ends of every namespace.
    if (words(namespaces.value).length) body.namespaces = words(namespaces.value);
    try {
      const w = await api("POST", "/v1/webhooks", body);
      out.className = "notice";
      out.replaceChildren(
        h("p", {}, "Subscribed ", h("code", {}, w.id), ". Its signing secret is shown this once; keep it now:"),
        h("pre", { id: "wh-secret" }, w.secret));
      form.reset();
      await created();
    } catch (err) {
      out.className = "";
      fail(err, out);
    } finally {
      button.disabled = false;
    }
  } },
    h("label", { for: "wh-url" }, "URL", url),
    h("fieldset", { class: "events" }, h("legend", {}, "Events"),
      events.map((c) => h("label", { class: "pick" }, c, c.value))),
    h("label", { for: "wh-queues" }, "Queues (comma-separated)", queues),
    h("label", { for: "wh-namespaces" }, "Namespaces (comma-separated)", namespaces),
    button);
  return h("details", { class: "create" }, h("summary", {}, "New subscription"), form, out);
}

export async function webhooksView({ main, fail }, chosen) {
  const list = h("div", { id: "webhooks", "aria-live": "polite" }, h("p", { class: "muted" }, "Loading…"));
  const detail = h("section", { id: "webhook", "aria-label": "Chosen subscription" });
  const deliveries = h("div", { id: "deliveries", "aria-live": "polite" });
  const out = h("div", { id: "webhook-result", role: "status" });
  let shownList = null;
  let shownLog = null;
  let gone = false;

  async function refreshList() {
    const { webhooks } = await api("GET", "/v1/webhooks");
    // Unchanged rows keep their elements, so a focused link keeps its focus across refreshes.
    const signature = JSON.stringify(webhooks);
    if (signature === shownList) return;
    shownList = signature;
    if (!webhooks.length) {
      list.replaceChildren(h("p", { class: "muted" }, "No subscriptions yet."));
      return;
    }
    list.replaceChildren(table(["Subscription", "URL", "Events", "Namespaces", "Queues", "Created"],
      webhooks.map((w) => h("tr", { "data-webhook": w.id, "aria-current": w.id === chosen ? "true" : null },
        h("td", {}, h("a", { href: `#/webhooks/${enc(w.id)}`, class: "webhook-link" }, w.id)),
        h("td", { class: "url" }, w.url),
        h("td", { class: "events" }, joined(w.events, "—")),
        h("td", { class: "namespaces" }, joined(w.namespaces, "every")),
        h("td", { class: "queues" }, joined(w.queues, "—")),
        h("td", {}, when(w.created_at))))));
  }

  async function refreshLog() {
    if (!chosen || gone) return;
    let log;
    try {
      log = await api("GET", `/v1/webhooks/${enc(chosen)}/deliveries`);
    } catch (e) {
      if (e.code !== "unknown_webhook") throw e;
      gone = true;
      deliveries.replaceChildren(h("p", { class: "notice error" },
        `There is no subscription ${chosen}: it was deleted, or never existed.`));
      return;
    }
    const rows = log.deliveries || [];
    const signature = JSON.stringify(rows);
    if (signature === shownLog) return;
    shownLog = signature;
    if (!rows.length) {
      deliveries.replaceChildren(h("p", { class: "muted" }, "Nothing delivered yet."));
      return;
    }
    // The gateway answers newest first; the page keeps its order.
    deliveries.replaceChildren(table(["Event", "Message", "Attempt", "Outcome", "Latency", "Time"],
      rows.map((d) => h("tr", { "data-event": d.event, "data-delivered": d.delivered ? "true" : "false" },
        h("td", { class: "event" }, d.event),
        h("td", {}, h("code", {}, d.webhook_id)),
        h("td", { class: "attempt" }, d.attempt),
        h("td", { class: `outcome status ${d.delivered ? "status-completed" : "status-failed"}` },
          d.status == null ? `no answer: ${d.error ?? "—"}`
            : d.error ? `HTTP ${d.status}: ${d.error}` : `HTTP ${d.status}`),
        h("td", { class: "latency" }, `${d.latency_ms} ms`),
        h("td", {}, when(d.at))))));
  }

  function deleteControls() {
    const ask = h("div", { id: "delete-confirm", hidden: true, role: "group", "aria-label": "Confirm the delete" },
      h("span", {}, `Delete ${chosen} and its delivery log? Deliveries still queued are dropped.`), " ",
      h("button", { type: "button", id: "delete-yes", onclick: async (e) => {
        e.target.disabled = true;
        try {
          const r = await api("DELETE", `/v1/webhooks/${enc(chosen)}`, {});
          gone = true;
          ask.hidden = true;
          start.hidden = true;
          out.className = "notice";
          out.textContent = r.deleted ? `Deleted ${chosen}.` : `${chosen} was already gone.`;
          deliveries.replaceChildren();
          await refreshList();
        } catch (err) {
          e.target.disabled = false;
          fail(err, out);
        }
      } }, "Yes, delete"), " ",
      h("button", { type: "button", class: "quiet", id: "delete-no", onclick: () => {
        ask.hidden = true;
        start.hidden = false;
        start.focus();
      } }, "Keep it"));
    const start = h("button", { type: "button", class: "quiet", id: "delete-webhook", onclick: () => {
      start.hidden = true;
      ask.hidden = false;
      ask.querySelector("#delete-no").focus();
    } }, "Delete subscription");
    return h("div", { class: "flow" }, start, ask);
  }

  main.replaceChildren(h("h1", {}, "Webhooks"),
    // The new subscription joins the list without leaving the page, which would take its secret
    // off the screen before the operator copied it.
    createForm(fail, async () => {
      shownList = null;
      await refreshList();
    }),
    list, detail);
  if (chosen) {
    detail.replaceChildren(h("h2", {}, "Deliveries of ", h("code", { id: "webhook-id" }, chosen)),
      deleteControls(), out, deliveries);
  } else {
    detail.replaceChildren(h("p", { class: "muted" }, "Choose a subscription to see its deliveries."));
  }
  return every(2000, async () => {
    try {
      await refreshList();
    } catch (e) {
      shownList = null;
      fail(e, list);
    }
    try {
      await refreshLog();
    } catch (e) {
      shownLog = null;
      fail(e, deliveries);
    }
  });
}
