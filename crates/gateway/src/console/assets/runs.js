// `#/runs`: the runs of a namespace, filtered by status, refreshed every two seconds.
import { api, enc, every, h, query } from "/console/api.js";

const STATUSES = ["", "pending", "running", "paused", "waiting_human", "completed", "failed", "cancelled"];

/** The run page's hash for a listed run (its session is its log key when they differ). */
export function runHref(run, namespace) {
  const session = run.log_key && run.log_key !== run.run_id ? run.log_key : "";
  return `#/run/${enc(run.run_id)}${query({ session, namespace })}`;
}

export async function runsView({ main, params, fail }) {
  const namespace = params.get("namespace") || "";
  const status = params.get("status") || "";
  const ns = h("input", { id: "f-namespace", name: "namespace", value: namespace, placeholder: "(default)" });
  const st = h("select", { id: "f-status", name: "status" },
    STATUSES.map((s) => h("option", { value: s, selected: s === status }, s || "any")));
  const form = h("form", { class: "filters", role: "search", onsubmit: (e) => {
    e.preventDefault();
    location.hash = `#/runs${query({ namespace: ns.value.trim(), status: st.value })}`;
  } },
    h("label", { for: "f-namespace" }, "Namespace", ns),
    h("label", { for: "f-status" }, "Status", st),
    h("button", { type: "submit" }, "Filter"));
  const body = h("div", { id: "runs", "aria-live": "polite" }, h("p", { class: "muted" }, "Loading…"));
  main.replaceChildren(h("h1", {}, "Runs"), form, body);
  return every(2000, async () => {
    try {
      const list = await api("GET", `/v1/runs${query({ namespace, status })}`);
      const runs = list.runs || [];
      if (!runs.length) {
        body.replaceChildren(h("p", { class: "muted" }, "No runs match."));
        return;
      }
      body.replaceChildren(h("div", { class: "table" }, h("table", {},
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Run"), h("th", { scope: "col" }, "Session"),
          h("th", { scope: "col" }, "Status"))),
        h("tbody", {}, runs.map((run) => h("tr", { "data-run-id": run.run_id },
          h("td", {}, h("a", { href: runHref(run, namespace), class: "run-link" }, run.run_id)),
          h("td", { class: "session" }, run.session_id ?? (run.log_key === run.run_id ? "—" : run.log_key)),
          h("td", { class: `status status-${run.status}` }, run.status)))))));
    } catch (e) {
      fail(e, body);
    }
  });
}
