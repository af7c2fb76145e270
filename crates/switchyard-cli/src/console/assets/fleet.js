// `#/queues`, `#/queue/<name>` and `#/workers`: the fleet as the gateway lists it.
import { api, enc, every, h, query } from "/console/api.js";

const table = (head, rows) => h("div", { class: "table" }, h("table", {},
  h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col" }, c)))),
  h("tbody", {}, rows)));

export async function queuesView({ main, fail }) {
  const body = h("div", { id: "queues", "aria-live": "polite" }, h("p", { class: "muted" }, "Loading…"));
  main.replaceChildren(h("h1", {}, "Queues"), body);
  return every(3000, async () => {
    try {
      const { queues } = await api("GET", "/v1/queues");
      const stats = await Promise.all(queues.map((q) => api("GET", `/v1/queues/${enc(q)}`)));
      if (!stats.length) {
        body.replaceChildren(h("p", { class: "muted" }, "No queues yet."));
        return;
      }
      body.replaceChildren(table(["Queue", "Waiting", "In flight", "Overdue", "Scheduled", "Dead"],
        stats.map((s) => h("tr", { "data-queue": s.queue },
          h("td", {}, h("a", { href: `#/queue/${enc(s.queue)}` }, s.queue)),
          h("td", {}, s.waiting), h("td", {}, s.in_flight), h("td", {}, s.overdue),
          h("td", {}, s.scheduled), h("td", { class: "dead" }, s.dead)))));
    } catch (e) {
      fail(e, body);
    }
  });
}

/** A line chart of the samples the page took itself (waiting and dead). */
function chart(samples) {
  const w = 400;
  const hgt = 90;
  const max = Math.max(1, ...samples.flatMap((s) => [s.waiting, s.dead]));
  const line = (key) => samples.map((s, i) =>
    `${(i / Math.max(1, samples.length - 1)) * w},${hgt - (s[key] / max) * (hgt - 10) - 5}`).join(" ");
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${hgt}`);
  svg.setAttribute("class", "chart");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `Waiting (blue) and dead (red) over the last ${samples.length} samples, at most ${max}`);
  for (const key of ["waiting", "dead"]) {
    const p = document.createElementNS(ns, "polyline");
    p.setAttribute("points", line(key));
    if (key === "dead") p.setAttribute("class", "dead");
    svg.append(p);
  }
  return svg;
}

export async function queueView({ main, fail }, name) {
  const samples = [];
  const cards = h("div", { class: "cards", id: "counts", "aria-live": "polite" });
  const chartBox = h("div", {});
  const tasks = h("div", { id: "tasks" });
  const dead = h("div", { id: "dead-letters" });
  const out = h("p", { id: "replay-result", role: "status" });
  const limit = h("input", { id: "replay-limit", type: "number", min: "1", placeholder: "all" });
  const replay = h("form", { class: "inline", id: "replay-form", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const n = parseInt(limit.value, 10);
      const r = await api("POST", `/v1/queues/${enc(name)}/dead-letters/replay`, n > 0 ? { limit: n } : {});
      out.textContent = `Replayed ${r.replayed}.`;
      out.className = "notice";
      await refresh();
    } catch (err) {
      fail(err, out);
    }
  } },
    h("label", { for: "replay-limit" }, "Oldest dead letters to replay", limit),
    h("button", { type: "submit", id: "replay" }, "Replay"));
  main.replaceChildren(
    h("p", {}, h("a", { href: "#/queues" }, "← Queues")),
    h("h1", {}, "Queue ", h("code", {}, name)), cards, chartBox,
    h("h2", {}, "Waiting tasks (peek)"), tasks,
    h("h2", {}, "Dead letters"), replay, out, dead);
  const card = (label, value, id) => h("div", { class: "card" }, label, h("b", { id }, value));
  async function refresh() {
    const s = await api("GET", `/v1/queues/${enc(name)}`);
    samples.push(s);
    if (samples.length > 100) samples.shift();
    cards.replaceChildren(card("High", s.tiers.high, "c-high"), card("Normal", s.tiers.normal, "c-normal"),
      card("Low", s.tiers.low, "c-low"), card("In flight", s.in_flight, "c-in-flight"),
      card("Overdue", s.overdue, "c-overdue"), card("Scheduled", s.scheduled, "c-scheduled"),
      card("Dead", s.dead, "c-dead"));
    chartBox.replaceChildren(chart(samples));
    const peek = await api("GET", `/v1/queues/${enc(name)}/tasks`);
    tasks.replaceChildren(peek.tasks.length
      ? h("ol", {}, peek.tasks.map((t) => h("li", {}, h("pre", {}, JSON.stringify(t)))))
      : h("p", { class: "muted" }, "None waiting."));
    const dl = await api("GET", `/v1/queues/${enc(name)}/dead-letters`);
    dead.replaceChildren(dl.dead_letters.length
      ? h("ol", {}, dl.dead_letters.map((t) => h("li", {}, h("pre", {}, JSON.stringify(t)))))
      : h("p", { class: "muted" }, "No dead letters."));
  }
  return every(3000, async () => {
    try {
      await refresh();
    } catch (e) {
      fail(e, cards);
    }
  });
}

function age(lastSeen) {
  const t = typeof lastSeen === "number" ? lastSeen * 1000 : Date.parse(lastSeen);
  if (!Number.isFinite(t)) return "—";
  return `${Math.max(0, Math.round((Date.now() - t) / 1000))} s`;
}

export async function workersView({ main, params, fail }) {
  const type = params.get("automation_type") || "";
  const body = h("div", { id: "workers", "aria-live": "polite" }, h("p", { class: "muted" }, "Loading…"));
  main.replaceChildren(h("h1", {}, "Workers"), body);
  return every(3000, async () => {
    try {
      const { workers } = await api("GET", `/v1/workers${query({ automation_type: type })}`);
      if (!workers.length) {
        body.replaceChildren(h("p", { class: "muted" }, "No workers registered."));
        return;
      }
      body.replaceChildren(table(["Worker", "Type", "State", "Heartbeat age", "Config generation"],
        workers.map((w) => h("tr", { "data-worker": w.worker_id },
          h("td", {}, w.worker_id), h("td", {}, w.automation_type), h("td", {}, w.state),
          h("td", {}, age(w.last_seen)), h("td", {}, `${w.applied_gen ?? "—"} / ${w.config_gen ?? "—"}`)))));
    } catch (e) {
      fail(e, body);
    }
  });
}
