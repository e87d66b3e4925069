// static/js as the browser loads it: plain ES modules, no bundler. Every import
// names a file that exists, by a relative path, and only exports it has; the
// pure modules (the ones Node's tests import) never reach a DOM module.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("../../static/js/", import.meta.url));
const PURE = ["front.js", "format.js", "money.js", "check-ids.js", "run/state.js", "run/text.js", "run/frames.js"];

const files = readdirSync(ROOT, { recursive: true }).filter((f) => f.endsWith(".js")).map((f) => f.split("\\").join("/"));
const source = (file) => readFileSync(join(ROOT, file), "utf-8");

// [{names: ["a", "b"] | "*" | [], from: "./x.js"}] of a module's static imports.
function imports(file) {
  const found = [];
  for (const m of source(file).matchAll(/^import\s+(?:\{([^}]*)\}|\*\s+as\s+\w+|(\w+))?\s*(?:from\s+)?["']([^"']+)["'];?/gm)) {
    const names = m[1] !== undefined ? m[1].split(",").map((n) => n.trim().split(/\s+as\s+/)[0]).filter(Boolean) : m[2] ? ["default"] : "*";
    found.push({ names, from: m[3] });
  }
  return found;
}

function exportsOf(file) {
  const names = new Set();
  for (const m of source(file).matchAll(/^export\s+(?:async\s+)?(?:function\*?|const|let|class)\s+([\w$]+)/gm)) names.add(m[1]);
  return names;
}

const target = (file, from) => relative(ROOT, resolve(dirname(join(ROOT, file)), from)).split("\\").join("/");

test("the run page's modules are all there", () => {
  for (const file of ["run-page.js", ...PURE, "run/page.js", "run/charts.js", "run/header.js", "run/table.js", "run/streams.js"]) {
    assert.ok(files.includes(file), file);
  }
});

for (const file of files) {
  test(`${file} imports only relative files that exist, and names they export`, () => {
    for (const { names, from } of imports(file)) {
      assert.match(from, /^\.\.?\/.*\.js$/, `${file}: "${from}" is not a relative path to a .js file (no bundler resolves bare names)`);
      const dep = target(file, from);
      assert.ok(files.includes(dep), `${file} imports ${from}: no static/js/${dep}`);
      if (names === "*") continue;
      const exported = exportsOf(dep);
      for (const name of names) assert.ok(exported.has(name), `${file} imports ${name} from ${from}, which does not export it`);
    }
  });
}

test("the pure modules import only pure modules (no DOM, so Node's tests load them as the browser does)", () => {
  for (const file of PURE) {
    for (const { from } of imports(file)) assert.ok(PURE.includes(target(file, from)), `${file} imports ${from}`);
    const code = source(file).replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
    assert.doesNotMatch(code, /\b(document|window|Plotly|localStorage|fetch|requestAnimationFrame)\b/, `${file} touches the DOM`);
  }
});

// run-page.js and every module it reaches, import by import.
function closure(entry) {
  const seen = new Set([entry]);
  const queue = [entry];
  while (queue.length) {
    const file = queue.shift();
    for (const { from } of imports(file)) {
      const dep = target(file, from);
      if (!seen.has(dep)) { seen.add(dep); queue.push(dep); }
    }
  }
  return seen;
}

test("the run page's template preloads every module run-page.js reaches, and no other", () => {
  const template = readFileSync(new URL("../../templates/runs/detail.html", import.meta.url), "utf-8");
  const preloaded = [...template.matchAll(/<link rel="modulepreload" href="\{% static 'js\/([^']+)' %\}">/g)].map((m) => m[1]);
  assert.deepEqual([...preloaded].sort(), [...closure("run-page.js")].sort());
});
