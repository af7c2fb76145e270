// The console's shell: hash routes, the token form, and one view at a time.
import { NeedToken, errorNotice, h, setToken, token } from "/console/api.js";
import { runsView } from "/console/runs.js";
import { runView } from "/console/run.js";
import { queuesView, queueView, workersView } from "/console/fleet.js";
import { taskView } from "/console/task.js";
import { webhooksView } from "/console/webhooks.js";

const main = document.getElementById("main");
const forget = document.getElementById("forget");
let stop = () => {};

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, search] = raw.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, params: new URLSearchParams(search || "") };
}

function tokenForm(message) {
  const input = h("input", { type: "password", name: "token", id: "token", autocomplete: "off", required: true });
  const form = h("form", { class: "inline", id: "token-form", onsubmit: (e) => {
    e.preventDefault();
    setToken(input.value.trim());
    render();
  } },
    h("label", { for: "token" }, "Bearer token", input),
    h("button", { type: "submit" }, "Sign in"));
  // replaceChildren writes a null argument as the text "null", so the notice is left out
  // rather than passed as null when there is no message.
  const notice = message ? [h("p", { class: "notice error", role: "alert", id: "token-error" }, message)] : [];
  main.replaceChildren(
    h("h1", {}, "This gateway needs a token"),
    ...notice,
    h("p", { class: "muted" }, "The token stays in this browser tab only (session storage) and is sent as a bearer header; streams use short-lived tickets."),
    form);
  input.focus();
}

/** Calls the view; a NeedToken anywhere in it (now or later) shows the token form. */
function onNeedToken(e) {
  stop();
  stop = () => {};
  const message = token() ? "The gateway refused this token. Enter another one." : null;
  setToken(null);
  forget.hidden = true;
  tokenForm(message);
}

/** A view's failure: the token form for NeedToken, else a notice in `where` (default: the page). */
function fail(e, where) {
  if (e instanceof NeedToken) onNeedToken(e);
  else (where || main).replaceChildren(errorNotice(e));
}

async function render() {
  stop();
  stop = () => {};
  const { parts, params } = parseHash();
  const section = parts[0] || "runs";
  for (const a of document.querySelectorAll("header nav a")) {
    if (a.dataset.section === section || (section === "run" && a.dataset.section === "runs")
      || ((section === "queue" || section === "task") && a.dataset.section === "queues")) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  forget.hidden = !token();
  const ctx = { main, params, fail };
  try {
    if (section === "run" && parts[1]) stop = await runView(ctx, parts[1]);
    else if (section === "queues") stop = await queuesView(ctx);
    else if (section === "queue" && parts[1]) stop = await queueView(ctx, parts[1]);
    else if (section === "task" && parts[1] && parts[2]) stop = await taskView(ctx, parts[1], parts[2]);
    else if (section === "workers") stop = await workersView(ctx);
    else if (section === "webhooks") stop = await webhooksView(ctx, parts[1]);
    else stop = await runsView(ctx);
  } catch (e) {
    fail(e);
  }
}

forget.addEventListener("click", () => {
  setToken(null);
  render();
});
window.addEventListener("hashchange", () => {
  render();
  main.focus();
});
render();
