// Fails when the published declarations (`dist/**/*.d.ts`) use `any`: every public type is
// either a gateway schema (generated from the OpenAPI document) or written out, and JSON whose
// shape the gateway does not fix is `unknown` or `Json`.

import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const dist = join(dirname(fileURLToPath(import.meta.url)), "..", "dist");

function* declarations(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* declarations(path);
    else if (entry.name.endsWith(".d.ts")) yield path;
  }
}

/** The code of a declaration file without its comments and string literals. */
function code(text) {
  return text
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/\/\/.*$/gm, "")
    .replace(/"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\]|\\.)*`/g, '""');
}

let found = [];
let files = 0;
for (const path of declarations(dist)) {
  files++;
  const lines = code(readFileSync(path, "utf8")).split("\n");
  lines.forEach((line, i) => {
    if (/\bany\b/.test(line)) found.push(`${path}:${i + 1}: ${line.trim()}`);
  });
}
if (files === 0) {
  console.error("no declarations under dist/: run `npm run build` first");
  process.exit(1);
}
if (found.length > 0) {
  console.error(`\`any\` in the public types:\n  ${found.join("\n  ")}`);
  process.exit(1);
}
console.log(`${files} declaration files, no \`any\``);
