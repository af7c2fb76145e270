// Real servers for the tests: the `switchyard` binary (SWITCHYARD_BIN, else the workspace's
// debug build) on free ports, and private `redis-server` processes. Nothing is mocked.

import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
// build/test/harness.js → the package root is two levels up, the workspace four.
const packageRoot = resolve(here, "..", "..");

export function switchyardBin(): string {
  // Absolute: the gateways run in temporary directories.
  const given = process.env.SWITCHYARD_BIN;
  const bin = given ? resolve(given) : resolve(packageRoot, "..", "..", "target", "debug", "switchyard");
  if (!existsSync(bin)) {
    throw new Error(`no switchyard binary at ${bin}: run \`cargo build -p switchyard-cli\` or set SWITCHYARD_BIN`);
  }
  return bin;
}

export function tempDir(): { path: string; remove: () => void } {
  const path = mkdtempSync(join(tmpdir(), "switchyard-ts-"));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

export async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolvePort(port));
    });
  });
}

/** The environment of a gateway: none of the developer's SWITCHYARD_* settings leak in. */
function cleanEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith("SWITCHYARD_") && k !== "REDIS_URL" && k !== "POSTGRES_URL") env[k] = v;
  }
  env["SWITCHYARD_LOG"] = "warn";
  return env;
}

export interface Gateway {
  url: string;
  process: ChildProcess;
  /** SIGTERM, then waits for the exit (the gateway drains its streams first). */
  stop(): Promise<void>;
}

/** `switchyard serve --listen <listen> <args>` in `dir`; resolves once it prints its address. */
export async function startGateway(dir: string, args: string[], listen = "127.0.0.1:0"): Promise<Gateway> {
  const child = spawn(switchyardBin(), ["serve", "--listen", listen, ...args], {
    cwd: dir,
    env: cleanEnv(),
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout! });
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error("the gateway did not start within 30 s")), 30_000);
    child.once("exit", (code) => reject(new Error(`the gateway exited with ${String(code)} before listening`)));
    lines.once("line", (line) => {
      clearTimeout(timer);
      const prefix = "switchyard listening on ";
      if (line.startsWith(prefix)) resolveUrl(line.slice(prefix.length).trim());
      else reject(new Error(`unexpected first line ${JSON.stringify(line)}`));
    });
  });
  return {
    url,
    process: child,
    stop: () =>
      new Promise<void>((resolveStop) => {
        if (child.exitCode !== null || child.signalCode !== null) {
          resolveStop();
          return;
        }
        child.once("exit", () => resolveStop());
        child.kill("SIGTERM");
      }),
  };
}

/** The embedded default (one SQLite file in `dir`, memory stream bridge). */
export function embedded(dir: string, extra: string[] = []): Promise<Gateway> {
  return startGateway(dir, ["--sqlite", join(dir, "switchyard.db"), "--no-scheduler", ...extra]);
}

export interface Redis {
  url: string;
  stop(): Promise<void>;
}

/** A private `redis-server` on a free port, keeping nothing on disk. */
export async function startRedis(): Promise<Redis> {
  let server = "redis-server";
  try {
    execFileSync(server, ["--version"], { stdio: "ignore" });
  } catch {
    throw new Error("redis-server is not installed: `apt-get install redis-server` (.ci/run installs it)");
  }
  const port = await freePort();
  const child = spawn(server, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
    stdio: "ignore",
  });
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (await answersPing(port)) break;
    if (Date.now() > deadline) throw new Error(`redis-server on ${port} did not answer within 10 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    stop: () =>
      new Promise<void>((resolveStop) => {
        if (child.exitCode !== null) {
          resolveStop();
          return;
        }
        child.once("exit", () => resolveStop());
        child.kill("SIGKILL");
      }),
  };
}

function answersPing(port: number): Promise<boolean> {
  return new Promise((resolvePing) => {
    const socket = connect(port, "127.0.0.1");
    socket.once("error", () => resolvePing(false));
    socket.once("connect", () => socket.write("PING\r\n"));
    socket.once("data", (data) => {
      socket.destroy();
      resolvePing(data.toString().startsWith("+PONG"));
    });
  });
}

/** A token made by `switchyard token new`: its secret and its entry for the token file. */
export function newToken(dir: string, name: string, args: string[]): { secret: string; entry: string } {
  const out = execFileSync(switchyardBin(), ["token", "new", name, ...args], { cwd: dir, env: cleanEnv(), encoding: "utf8" });
  const lines = out.split("\n");
  const secret = lines[1]?.replace(/^# /, "") ?? "";
  const entry = lines.filter((l) => !l.startsWith("#")).join("\n");
  return { secret, entry };
}

export function writeTokenFile(dir: string, entries: string[]): string {
  const path = join(dir, "tokens.toml");
  writeFileSync(path, entries.join("\n"));
  return path;
}

/** Polls `check` until it holds or `ms` pass. */
export async function eventually(check: () => Promise<boolean> | boolean, ms = 10_000, what = "condition"): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`${what} did not hold within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
