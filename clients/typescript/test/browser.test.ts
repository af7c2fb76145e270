// The package in a real browser (Debian's headless Chromium, driven by playwright-core): a page
// on another origin loads the built ESM, holds no token, follows a run with stream tickets its
// own server hands it, and sees every event and the end; a cancel from the page (DELETE, a CORS
// preflight) reaches the gateway.

import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import { join, resolve } from "node:path";
import { after, before, test } from "node:test";

import { chromium, type Browser } from "playwright-core";

import { Switchyard } from "../src/index.js";
import { embedded, freePort, type Gateway, newToken, tempDir, writeTokenFile } from "./harness.js";

const CHROMIUM = process.env["CHROMIUM"] ?? "/usr/bin/chromium";
// build/test/ → the package root.
const root = resolve(import.meta.dirname ?? new URL(".", import.meta.url).pathname, "..", "..");

const dir = tempDir();
let gateway: Gateway;
let app: Server;
let appUrl: string;
let browser: Browser;
let sy: Switchyard;
let secret: string;

const PAGE = `<!doctype html><meta charset="utf-8"><title>switchyard-client in a page</title>
<script type="module">
  import { Switchyard } from "/dist/index.js";
  const params = new URLSearchParams(location.search);
  const page = new Switchyard({ baseUrl: params.get("gateway") });
  window.frames_ = [];
  window.follow = async (run) => {
    for await (const frame of page.runs.follow(run, {
      namespace: "web",
      // The page's own server trades its token for a ticket; the page never sees the token.
      ticket: async () => (await (await fetch("/ticket?run=" + encodeURIComponent(run))).json()).ticket,
    })) {
      window.frames_.push(frame.type === "event" ? frame.data.kind : frame.type);
    }
    return window.frames_;
  };
  window.cancelTask = async (queue, id, token) =>
    new Switchyard({ baseUrl: params.get("gateway"), token }).queue(queue).cancel(id);
  window.ready = true;
</script>`;

before(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium (.ci/run installs it), or set CHROMIUM`);
  }
  const appPort = await freePort();
  appUrl = `http://127.0.0.1:${appPort}`;
  const token = newToken(dir.path, "web-app", ["--namespace", "web", "--queue", "web-*", "--right", "read", "--right", "write"]);
  const file = writeTokenFile(dir.path, [token.entry]);
  const config = join(dir.path, "switchyard.toml");
  writeFileSync(config, `cors_origins = ["${appUrl}"]\n`);
  gateway = await embedded(dir.path, ["--auth", file, "--config", config]);
  secret = token.secret;
  sy = new Switchyard({ baseUrl: gateway.url, token: secret });

  // The web app's server: the page, the package's build, and a ticket endpoint.
  app = createServer((req, res) => {
    const url = new URL(req.url ?? "/", appUrl);
    if (url.pathname === "/") {
      res.writeHead(200, { "content-type": "text/html" }).end(PAGE);
    } else if (url.pathname === "/ticket") {
      sy.runs
        .streamTicket(url.searchParams.get("run") ?? "", { namespace: "web" })
        .then((t) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ ticket: t.ticket })))
        .catch((e: unknown) => res.writeHead(500).end(String(e)));
    } else if (url.pathname.startsWith("/dist/") && /^[\w/.-]+\.js$/.test(url.pathname) && !url.pathname.includes("..")) {
      const path = join(root, url.pathname);
      if (existsSync(path)) res.writeHead(200, { "content-type": "text/javascript" }).end(readFileSync(path));
      else res.writeHead(404).end();
    } else {
      res.writeHead(404).end();
    }
  });
  await new Promise<void>((r) => app.listen(appPort, "127.0.0.1", r));
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--disable-gpu"] });
});

after(async () => {
  await browser?.close();
  app?.close();
  await gateway?.stop();
  dir.remove();
});

test("a page follows a run with stream tickets and cancels a task across origins", async () => {
  const page = await browser.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(`${appUrl}/?gateway=${encodeURIComponent(gateway.url)}`);
  await page.waitForFunction(() => (window as unknown as { ready?: boolean }).ready === true);

  await sy.runs.start({ run_id: "web-run", namespace: "web", invocable: "x", kind_of_invocable: "agent", input: [] });
  const followed = page.evaluate(() => (window as unknown as { follow: (r: string) => Promise<string[]> }).follow("web-run"));
  await page.waitForFunction(() => (window as unknown as { frames_: string[] }).frames_.length >= 1);
  for (const text of ["a", "b", "c"]) await sy.runs.append("web-run", { kind: "text.delta", message_id: "m", text }, { namespace: "web" });
  await sy.runs.append("web-run", { kind: "run.completed", output: [], usage: { input_tokens: 0, output_tokens: 0, usd: null } }, { namespace: "web" });
  assert.deepEqual(await followed, ["run.started", "text.delta", "text.delta", "text.delta", "run.completed", "end"]);

  // An operator's page holding a token cancels with DELETE: a preflighted request the gateway's
  // CORS allows for the app's origin.
  const q = sy.queue("web-jobs");
  await q.submit({ n: 1 }, { id: "w1" });
  const cancelled = await page.evaluate(
    ([token]) => (window as unknown as { cancelTask: (q: string, id: string, t: string) => Promise<{ outcome: string }> }).cancelTask("web-jobs", "w1", token!),
    [secret],
  );
  assert.equal(cancelled.outcome, "cancelled");
  assert.equal((await q.task("w1")).state, "cancelled");
  assert.deepEqual(errors, []);
  await page.close();
});
