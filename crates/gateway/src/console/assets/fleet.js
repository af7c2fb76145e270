// `#/queues`, `#/queue/<name>` and `#/workers`: the fleet as the gateway lists it.
import { api, enc, every, h, query } from "/console/api.js";
import { finishedTasks } from "/console/finished.js";

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
      body.replaceChildren(table(["Queue", "State", "Waiting", "In flight", "Overdue", "Scheduled", "Dead"],
        stats.map((s) => h("tr", { "data-queue": s.queue },
          h("td", {}, h("a", { href: `#/queue/${enc(s.queue)}` }, s.queue)),
          h("td", { class: `state status ${s.paused ? "status-paused" : ""}` }, s.paused ? "paused" : "running"),
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

/** "3 s", "2 min": how long until a unix time (seconds), from this browser's clock. */
function until(unixSeconds) {
  if (typeof unixSeconds !== "number") return "—";
  const s = Math.round(unixSeconds - Date.now() / 1000);
  if (s <= 0) return "lapsed";
  return s < 120 ? `${s} s` : `${Math.round(s / 60)} min`;
}

/** A dead letter's JSON without its ref (the ref is its bytes again, base64url). */
function letterText(letter) {
  const shown = { ...letter };
  delete shown.ref;
  return JSON.stringify(shown, null, 2);
}

/** Unix seconds as local time, or a dash. */
function when(t) {
  return typeof t === "number" ? new Date(t * 1000).toLocaleString() : "—";
}

/**
 * What a reader wants of a dead letter (ADR 0384), from its envelope: the task id, the attempts
 * made, the last error and the payload. The envelope's `attempt` is the seed's retry counter,
 * which our consumer leaves at 0; `last_error.attempt` is the attempt that failed (ADR 0250), so
 * the attempts made are the larger of the two. A `last_error` of another shape (a foreign
 * writer's string) is shown as its message.
 */
function readLetter(l) {
  const err = l.last_error;
  const error = err && typeof err === "object"
    ? { message: String(err.message ?? "—"), attempt: err.attempt, at: err.at }
    : err != null ? { message: typeof err === "string" ? err : JSON.stringify(err) } : null;
  const counts = [l.attempt, error && error.attempt].filter((n) => typeof n === "number");
  const attempts = counts.length ? Math.max(...counts) : null;
  const id = typeof l.id === "string" || typeof l.id === "number" ? String(l.id) : null;
  let payload;
  if (l.raw !== undefined) payload = `(not JSON) ${l.raw}`;
  else if ("payload" in l) payload = JSON.stringify(l.payload, null, 2);
  else payload = "—";
  return { id, attempts, maxAttempts: l.max_attempts, error, payload };
}

export async function queueView({ main, params, fail }, name) {
  const samples = [];
  const path = `/v1/queues/${enc(name)}`;
  const cards = h("div", { class: "cards", id: "counts", "aria-live": "polite" });
  const chartBox = h("div", {});
  const tasks = h("div", { id: "tasks" });
  const inFlight = h("div", { id: "in-flight" });
  const dead = h("div", { id: "dead-letters" });
  const out = h("p", { id: "replay-result", role: "status" });
  const cancelOut = h("p", { id: "in-flight-result", role: "status" });
  const finished = finishedTasks(name, params.get("finished"), fail);

  // Flow control (ADR 0312): the paused state with its button, the rate limit and the throttle.
  const state = h("b", { id: "q-state" }, "…");
  const rate = h("span", { id: "q-rate" }, "…");
  const throttled = h("span", { id: "q-throttled" }, "");
  const flowOut = h("p", { id: "flow-result", role: "status" });
  let paused = false;
  const toggle = h("button", { type: "button", id: "pause-toggle", disabled: true, onclick: async () => {
    toggle.disabled = true;
    try {
      const r = await api("POST", `${path}/${paused ? "resume" : "pause"}`, {});
      showPaused(r.paused);
      flowOut.textContent = r.paused ? "Paused: workers get nothing until you resume."
        : "Resumed: workers get tasks again.";
      flowOut.className = "notice";
      await refresh();
    } catch (err) {
      fail(err, flowOut);
    } finally {
      toggle.disabled = false;
    }
  } }, "Pause");
  function showPaused(p) {
    paused = Boolean(p);
    state.textContent = paused ? "Paused" : "Running";
    state.className = paused ? "status status-paused" : "status status-completed";
    toggle.textContent = paused ? "Resume" : "Pause";
    toggle.setAttribute("aria-pressed", paused ? "true" : "false");
    toggle.disabled = false;
  }
  const flow = h("section", { class: "flow", "aria-label": "Flow control" },
    h("span", {}, "State: ", state), toggle,
    h("span", {}, "Rate limit: ", rate), throttled);

  // Dead letters (ADR 0312): checkboxes keyed by ref and occurrence (identical letters share a ref, and
  // each checked one requeues one of them), kept across refreshes.
  const chosen = new Set();
  let shownLetters = "";
  const selectedButton = h("button", { type: "button", id: "requeue-selected", disabled: true,
    onclick: async () => {
      const refs = [...chosen].map((k) => k.slice(0, k.lastIndexOf("#")));
      if (!refs.length) return;
      selectedButton.disabled = true;
      try {
        const r = await api("POST", `${path}/dead-letters/requeue`, { refs });
        chosen.clear();
        shownLetters = "";
        out.textContent = r.missing && r.missing.length
          ? `Requeued ${r.requeued}; ${r.missing.length} were no longer dead.`
          : `Requeued ${r.requeued}.`;
        out.className = "notice";
        await refresh();
      } catch (err) {
        fail(err, out);
        updateSelected();
      }
    } }, "Requeue selected");
  function updateSelected() {
    selectedButton.disabled = chosen.size === 0;
    selectedButton.textContent = chosen.size ? `Requeue selected (${chosen.size})` : "Requeue selected";
  }
  const limit = h("input", { id: "replay-limit", type: "number", min: "1", placeholder: "all",
    oninput: () => { replayButton.textContent = labelAll(); } });
  const labelAll = () => {
    const n = parseInt(limit.value, 10);
    return n > 0 ? `Requeue oldest ${n}` : "Requeue all";
  };
  const replayButton = h("button", { type: "submit", id: "replay", class: "quiet" }, "Requeue all");
  const replay = h("form", { class: "inline", id: "replay-form", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const n = parseInt(limit.value, 10);
      const r = await api("POST", `${path}/dead-letters/requeue`, n > 0 ? { limit: n } : {});
      out.textContent = `Requeued ${r.requeued ?? r.replayed}.`;
      out.className = "notice";
      chosen.clear();
      shownLetters = "";
      await refresh();
    } catch (err) {
      fail(err, out);
    }
  } },
    h("label", { for: "replay-limit" }, "Oldest dead letters to requeue", limit),
    replayButton, selectedButton);

  const findId = h("input", { id: "find-task", required: true, autocomplete: "off" });
  const find = h("form", { class: "inline", id: "find-task-form", onsubmit: (e) => {
    e.preventDefault();
    location.hash = `#/task/${enc(name)}/${enc(findId.value.trim())}`;
  } }, h("label", { for: "find-task" }, "Task id", findId), h("button", { type: "submit" }, "Show task"));

  main.replaceChildren(
    h("p", {}, h("a", { href: "#/queues" }, "← Queues")),
    h("h1", {}, "Queue ", h("code", {}, name)), flow, flowOut, find, cards, chartBox,
    h("h2", {}, "In flight"), cancelOut, inFlight,
    h("h2", {}, "Waiting tasks (peek)"), tasks,
    finished.section,
    h("h2", {}, "Dead letters"), replay, out, dead);
  const card = (label, value, id) => h("div", { class: "card" }, label, h("b", { id }, value));

  function renderLetters(letters) {
    const seen = new Map();
    const keyed = letters.map((l) => {
      const n = (seen.get(l.ref) || 0) + 1;
      seen.set(l.ref, n);
      return [`${l.ref}#${n}`, l];
    });
    const signature = keyed.map(([k]) => k).join("\n");
    // Unchanged letters keep their elements, so a checkbox keeps its state and its focus.
    if (signature === shownLetters) return;
    shownLetters = signature;
    for (const k of [...chosen]) if (!keyed.some(([key]) => key === k)) chosen.delete(k);
    updateSelected();
    if (!keyed.length) {
      dead.replaceChildren(h("p", { class: "muted" }, "No dead letters."));
      return;
    }
    dead.replaceChildren(h("ol", { class: "letters" }, keyed.map(([key, l], i) => {
      const id = `dl-${i}`;
      const box = h("input", { type: "checkbox", id, class: "dl-pick", "data-ref": l.ref || "",
        checked: chosen.has(key), disabled: !l.ref, onchange: () => {
          if (box.checked) chosen.add(key); else chosen.delete(key);
          updateSelected();
        } });
      const r = readLetter(l);
      const field = (label, key, value) => [h("dt", {}, label), h("dd", { "data-field": key }, value)];
      const attempts = r.attempts == null ? "—"
        : r.maxAttempts ? `${r.attempts} of ${r.maxAttempts}` : String(r.attempts);
      return h("li", { "data-letter": i, "data-task": r.id ?? "" },
        h("div", { class: "letter-head" },
          h("label", { for: id, class: "pick" }, box, r.id == null ? "Task without an id" : "Task"),
          r.id == null ? "" : h("a", { href: `#/task/${enc(name)}/${enc(r.id)}`, class: "letter-task" }, r.id)),
        h("dl", { class: "fields" },
          ...field("Attempts", "attempts", attempts),
          ...field("Last error", "error", r.error ? r.error.message : "—"),
          ...field("Failed on attempt", "error-attempt", r.error && r.error.attempt != null ? String(r.error.attempt) : "—"),
          ...field("Failed at", "error-at", when(r.error && r.error.at)),
          ...field("Payload", "payload", h("pre", { class: "payload" }, r.payload))),
        h("details", { class: "raw" }, h("summary", {}, "raw"), h("pre", {}, letterText(l))));
    })));
  }

  async function refresh() {
    const s = await api("GET", path);
    samples.push(s);
    if (samples.length > 100) samples.shift();
    showPaused(s.paused);
    rate.textContent = s.rate_limit
      ? `${s.rate_limit.max} per ${s.rate_limit.per_seconds ?? (s.rate_limit.per_ms / 1000)} s`
      : "none";
    throttled.textContent = s.throttled_ms ? `next token in ${s.throttled_ms} ms` : "";
    cards.replaceChildren(card("High", s.tiers.high, "c-high"), card("Normal", s.tiers.normal, "c-normal"),
      card("Low", s.tiers.low, "c-low"), card("In flight", s.in_flight, "c-in-flight"),
      card("Overdue", s.overdue, "c-overdue"), card("Scheduled", s.scheduled, "c-scheduled"),
      card("Dead", s.dead, "c-dead"), card("Throttled (ms)", s.throttled_ms ?? 0, "c-throttled"),
      card("Completed", s.completed ?? 0, "c-completed"), card("Cancelled", s.cancelled ?? 0, "c-cancelled"));
    chartBox.replaceChildren(chart(samples));
    const flying = await api("GET", `${path}/in-flight`);
    const list = flying.in_flight || [];
    inFlight.replaceChildren(list.length
      ? table(["Task", "Attempt", "Priority", "Lapses in", "Progress", ""],
        list.map((t) => h("tr", { "data-task": t.id ?? "" },
          h("td", {}, t.id == null ? "—" : h("a", { href: `#/task/${enc(name)}/${enc(t.id)}` }, t.id)),
          h("td", {}, t.attempt), h("td", {}, t.priority),
          h("td", {}, until(t.visible_until)),
          h("td", { class: "progress" }, t.progress == null ? "—" : JSON.stringify(t.progress)),
          h("td", {}, t.id == null ? "" : h("button", { type: "button", class: "quiet cancel-task",
            onclick: async (e) => {
              e.target.disabled = true;
              try {
                const r = await api("DELETE", `${path}/tasks/${enc(t.id)}`, {});
                cancelOut.textContent = r.outcome === "cancel_requested"
                  ? `Cancel of ${t.id} requested: its worker is told, and it ends cancelled.`
                  : `${t.id}: ${r.outcome} (${r.state}).`;
                cancelOut.className = "notice";
              } catch (err) {
                fail(err, cancelOut);
              }
            } }, "Cancel")))))
      : h("p", { class: "muted" }, "No task in flight."));
    const peek = await api("GET", `${path}/tasks`);
    tasks.replaceChildren(peek.tasks.length
      ? h("ol", {}, peek.tasks.map((t) => h("li", {}, h("pre", {}, JSON.stringify(t)))))
      : h("p", { class: "muted" }, "None waiting."));
    const dl = await api("GET", `${path}/dead-letters`);
    renderLetters(dl.dead_letters);
    await finished.refresh();
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

// The task ids an HTTP worker's heartbeat reported (ADR 0352); other workers report none.
function held(stats) {
  const tasks = stats && Array.isArray(stats.held_tasks) ? stats.held_tasks : null;
  if (!tasks) return "—";
  if (!tasks.length) return "none";
  const shown = tasks.slice(0, 5).join(", ");
  return tasks.length > 5 ? `${shown} … (${tasks.length} in all)` : shown;
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
      body.replaceChildren(table(["Worker", "Type", "State", "Heartbeat age", "Tasks held", "Config generation"],
        workers.map((w) => h("tr", { "data-worker": w.worker_id },
          h("td", {}, w.worker_id), h("td", {}, w.automation_type), h("td", {}, w.state),
          h("td", {}, age(w.last_seen)), h("td", { class: "held" }, held(w.stats)),
          h("td", {}, `${w.applied_gen ?? "—"} / ${w.config_gen ?? "—"}`)))));
    } catch (e) {
      fail(e, body);
    }
  });
}
