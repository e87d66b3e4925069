// @ts-check
// The verifier editor: a form and the raw JSON kept in sync, live validation
// through /api/verifiers/lint (errors shown next to the field they name) and the
// "Try it" panel scoring an output through /api/verifiers/score, with both
// judgments side by side (docs/verifier-semantics.md "Passed and verdict"): the
// verdict by the verdict thresholds shown in the panel, passed / failed by each
// verifier's passThreshold.
// Every piece of user or server text is put in the DOM with textContent.

/**
 * One param of a check type: a property of its params' JSON Schema
 * (verifiers_app/selectors.py check_type_fields), in JSON Schema's words.
 * @typedef {{name: string, required: boolean, type?: string, default?: unknown, minimum?: number}} ParamField
 */

/**
 * A check of the spec as the form edits it (the JSON box may hold anything: the lint says what is wrong).
 * @typedef {object} Check
 * @property {string} [id]
 * @property {string} [type]
 * @property {number} [weight]
 * @property {boolean} [required]
 * @property {Record<string, unknown>} [params]
 */

/**
 * One verifier's part of a score: its score, passed / failed and its checks.
 * @typedef {{id: string, name?: string, score: number, passed: boolean, checks: Array<Check & {score: number, skipped?: boolean, reason?: string}>}} VerifierScore
 */

/**
 * What /api/verifiers/score answers: the score, each check's part and GEPA's feedback.
 * @typedef {object} ScoreResult
 * @property {number} score
 * @property {string} verdict
 * @property {boolean} passed
 * @property {string} [feedback]
 * @property {VerifierScore[]} verifiers
 */

/**
 * A saved test case: an output and what it should get of each judgment
 * (`expect`: the verdict or "any"; `expect_passed`: "passed", "failed" or
 * "any", absent in cases saved before it existed).
 * @typedef {{name: string, output: string, task: unknown, expect: string, expect_passed?: string}} TestCase
 */

/**
 * A test case's score, or why it could not be scored.
 * @typedef {{score?: number, verdict?: string, passed?: boolean, error?: string}} CaseResult
 */

/** The verdict thresholds of a run: what the preview judges the verdict by.
 * @typedef {{pass: number, borderline: number}} Thresholds
 */

/**
 * A task of a task set, as /api/tasksets/<id> lists it.
 * @typedef {{task_id: string, input: string, expected: unknown, params: unknown, metadata: unknown, verifier?: unknown}} Task
 */

import { deriveCheckId } from "./check-ids.js";

/** @type {Record<string, ParamField[]>} */
const CHECK_TYPES = JSON.parse(/** @type {HTMLElement} */ (document.getElementById("check-types")).textContent);
const jsonBox = /** @type {HTMLTextAreaElement} */ (document.getElementById("spec-json"));
const formBox = /** @type {HTMLElement} */ (document.getElementById("spec-form"));
const lintList = /** @type {HTMLElement} */ (document.getElementById("lint-problems"));
const lintStatus = /** @type {HTMLElement} */ (document.getElementById("lint-status"));
const csrf = /** @type {HTMLInputElement} */ (document.querySelector("#verifier-form [name=csrfmiddlewaretoken]")).value;
const tasksetSelect = /** @type {HTMLSelectElement} */ (document.getElementById("try-taskset"));
const taskSelect = /** @type {HTMLSelectElement} */ (document.getElementById("try-task"));
const taskBox = /** @type {HTMLTextAreaElement} */ (document.getElementById("try-task-json"));
const outputBox = /** @type {HTMLTextAreaElement} */ (document.getElementById("try-output"));
const resultBox = /** @type {HTMLElement} */ (document.getElementById("try-result"));
const passBox = /** @type {HTMLInputElement} */ (document.getElementById("try-threshold-pass"));
const borderlineBox = /** @type {HTMLInputElement} */ (document.getElementById("try-threshold-borderline"));

const form = /** @type {HTMLFormElement} */ (document.getElementById("verifier-form"));
// Once saved, a verifier's id names it in URLs, runs and versions: it cannot change.
const savedId = form.dataset.savedId || "";
const ID_FIXED = `id: a saved verifier's id cannot change (it is "${savedId}"); duplicate the verifier to use another id`;

// The parsed spec, or null while the JSON does not parse: whatever the user
// typed, so any shape (renderForm edits it with the form only when it is an object).
/** @type {any} */
let spec = null;
/** @type {string[]} */
let lastProblems = [];
/** @type {string[]} */
let lastWarnings = [];
// No problem is shown before the user changed something (a new verifier starts with an empty id).
let touched = false;
// Checks added with "Add a check" whose id is still derived from their type and
// argument (check-ids.js): changing either derives it again, until the user
// types a name. Ids the spec came with are never changed.
/** @type {WeakSet<Check>} */
const derivedIds = new WeakSet();

// An element with its attributes (`text`: its textContent, `on…`: a listener;
// true: present, false or null: absent) and children.
/**
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, any>} [attrs]
 * @param {...(Node | string | null | undefined | false)} children
 * @returns {HTMLElementTagNameMap[K]}
 */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (value === true) node.setAttribute(key, "");
    else if (value !== false && value != null) node.setAttribute(key, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

/**
 * The server's JSON: its answer, or {detail, problems} when it refused.
 * @param {string} url @param {unknown} body @returns {Promise<{ok: boolean, data: any}>}
 */
async function postJSON(url, body) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRFToken": csrf },
    body: JSON.stringify(body),
    credentials: "same-origin",
  });
  const data = await response.json().catch(() => ({ detail: `HTTP ${response.status}` }));
  return { ok: response.ok, data };
}

/**
 * @template {unknown[]} A
 * @param {(...args: A) => unknown} fn
 * @param {number} ms
 * @returns {(...args: A) => void}
 */
function debounce(fn, ms) {
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

// --- the form, built from the spec -------------------------------------------------

/**
 * @param {string} path the spec path the lint's problems name
 * @param {string} label
 * @param {unknown} value
 * @param {{type?: string, onchange: (field: HTMLInputElement) => void, step?: string, min?: number}} options
 */
function input(path, label, value, { type = "text", onchange, step, min }) {
  const field = el("input", { type, "data-path": path, step, min, value: value ?? "" });
  if (type === "checkbox") field.checked = Boolean(value);
  field.addEventListener(type === "checkbox" ? "change" : "input", () => onchange(field));
  return el("label", { class: type === "checkbox" ? "checkbox" : null }, type === "checkbox" ? field : label,
    type === "checkbox" ? label : field);
}

/**
 * Derive the id of a check added here again (after a change of its type or
 * argument), unique among the other checks, unless the user named it.
 * @param {Check} check @param {number} index
 */
function rederiveId(check, index) {
  if (!derivedIds.has(check)) return;
  const others = (Array.isArray(spec.checks) ? spec.checks : []).filter((/** @type {Check} */ c) => c !== check);
  check.id = deriveCheckId(check.type, check.params, others.map((/** @type {Check} */ c) => c?.id));
  const field = /** @type {HTMLInputElement | null} */ (formBox.querySelector(`input[data-path="checks[${index}].id"]`));
  if (field) field.value = check.id;
}

/** @param {Check} check @param {number} index @param {ParamField} field */
function paramField(check, index, field) {
  const path = `checks[${index}].params.${field.name}`;
  const value = check.params?.[field.name];
  const set = (/** @type {unknown} */ v) => {
    check.params = check.params || {};
    if (v === undefined) delete check.params[field.name];
    else check.params[field.name] = v;
    rederiveId(check, index);
    fromForm();
  };
  const label = `${field.name}${field.required ? "" : " (optional)"}`;
  // field: one property of the check type's params JSON Schema (verifiers_app.selectors.check_type_fields)
  if (field.type === "boolean") return input(path, label, value ?? field.default, { type: "checkbox", onchange: (f) => set(f.checked) });
  if (field.type === "integer") {
    return input(path, label, value, { type: "number", min: field.minimum, onchange: (f) => set(f.value === "" ? undefined : Number(f.value)) });
  }
  if (field.type === "array") {
    const shown = Array.isArray(value) ? value.join(", ") : value;
    return input(path, `${label}, comma-separated`, shown, {
      onchange: (f) => set(f.value.split(",").map((s) => s.trim()).filter(Boolean)),
    });
  }
  return input(path, label, value, { onchange: (f) => set(f.value === "" && !field.required ? undefined : f.value) });
}

/** @param {Check} check @param {number} index */
function checkCard(check, index) {
  const typeSelect = el("select", { "data-path": `checks[${index}].type` });
  const types = Object.keys(CHECK_TYPES);
  if (!types.includes(/** @type {string} */ (check.type))) types.push(check.type ?? "");
  for (const type of types) typeSelect.append(el("option", { value: type, text: type || "(choose)", selected: type === check.type }));
  typeSelect.addEventListener("change", () => {
    const fields = (CHECK_TYPES[typeSelect.value] || []).map((f) => f.name);
    check.type = typeSelect.value;
    check.params = Object.fromEntries(Object.entries(check.params || {}).filter(([k]) => fields.includes(k)));
    rederiveId(check, index);
    fromForm(true);
  });
  const remove = el("button", { type: "button", class: "danger", text: "Remove",
    onclick: () => { spec.checks.splice(index, 1); fromForm(true); } });
  // A check without a type has none of the known types' params.
  const params = (CHECK_TYPES[/** @type {string} */ (check.type)] || []).map((field) => paramField(check, index, field));
  // The check's id is its name in GEPA's feedback ("verifier/check: reason"): asked for first.
  const name = input(`checks[${index}].id`, "Check name (its id: GEPA's feedback quotes it)", check.id, {
    onchange: (f) => { derivedIds.delete(check); check.id = f.value; fromForm(); } });
  name.classList.add("check-name");
  /** @type {HTMLInputElement} */ (name.querySelector("input")).placeholder =
    `e.g. ${deriveCheckId(check.type, check.params, [])}: what it asks of the output`;
  return el("div", { class: "check-card", "data-path": `checks[${index}]` },
    name,
    el("div", { class: "fields" },
      el("label", {}, "Type", typeSelect),
      input(`checks[${index}].weight`, "Weight", check.weight ?? 1,
        { type: "number", step: "any", onchange: (f) => { check.weight = f.value === "" ? undefined : Number(f.value); fromForm(); } }),
      remove),
    input(`checks[${index}].required`, "Required (a failure fails the output whatever the score)", check.required,
      { type: "checkbox", onchange: (f) => { check.required = f.checked; fromForm(); } }),
    params.length ? el("div", { class: "params", "data-path": `checks[${index}].params` }, ...params)
      : el("p", { class: "hint", "data-path": `checks[${index}].params`,
        text: CHECK_TYPES[/** @type {string} */ (check.type)] ? "No parameters." : "Unknown type: it will be skipped when scoring." }));
}

function renderForm() {
  formBox.replaceChildren();
  if (spec === null || typeof spec !== "object" || Array.isArray(spec)) {
    formBox.append(el("p", { class: "hint", text: "Fix the JSON to edit with the form." }));
    return;
  }
  const idField = input("id", savedId ? "Id (fixed once saved)" : "Id", spec.id, { onchange: (f) => { spec.id = f.value; fromForm(); } });
  if (savedId) /** @type {HTMLInputElement} */ (idField.querySelector("input")).readOnly = true;
  const top = el("div", { class: "fields" },
    idField,
    input("name", "Name", spec.name, { onchange: (f) => { spec.name = f.value; fromForm(); } }),
    input("passThreshold", "Pass threshold", spec.passThreshold ?? 1, {
      type: "number", step: "0.05", onchange: (f) => { spec.passThreshold = f.value === "" ? undefined : Number(f.value); fromForm(); },
    }));
  formBox.append(top);
  if ((spec.kind ?? "native") !== "native") {
    formBox.append(el("p", { class: "hint", text: `Kind "${spec.kind}": edit its fields in the JSON below.` }));
    return;
  }
  /** @type {Check[]} */
  const checks = Array.isArray(spec.checks) ? spec.checks : [];
  const list = el("div", { "data-path": "checks" }, ...checks.map((check, i) => checkCard(check, i)));
  const add = el("button", { type: "button", text: "Add a check", onclick: () => {
    spec.checks = Array.isArray(spec.checks) ? spec.checks : [];
    /** @type {Check} */
    const check = { id: "", type: "contains", weight: 1, params: {} };  // id first in the JSON
    check.id = deriveCheckId(check.type, check.params, spec.checks.map((/** @type {Check} */ c) => c?.id));
    derivedIds.add(check);
    spec.checks.push(check);
    fromForm(true);
    // Ask for a name: the new check's name field, its derived id selected to type over.
    const field = /** @type {HTMLInputElement | null} */ (formBox.querySelector(`input[data-path="checks[${spec.checks.length - 1}].id"]`));
    field?.focus();
    field?.select();
  } });
  formBox.append(list, add);
}

// --- keeping both sides in sync ------------------------------------------------------

function fromForm(structural = false) {
  touched = true;
  jsonBox.value = JSON.stringify(spec, null, 2);
  if (structural) renderForm();
  showProblems(lastProblems, lastWarnings);
  changed();
}

function fromJSON() {
  try {
    spec = JSON.parse(jsonBox.value);
  } catch (error) {
    spec = null;
    renderForm();
    showProblems([`JSON: ${/** @type {Error} */ (error).message}`]);
    return;
  }
  renderForm();
  changed();
}

// --- live validation -------------------------------------------------------------------

/** @param {string} path */
function fieldFor(path) {
  // The most specific element whose data-path is the problem's path or a prefix of it.
  /** @type {HTMLElement | null} */
  let best = null;
  for (const node of /** @type {NodeListOf<HTMLElement>} */ (document.querySelectorAll("#spec-form [data-path]"))) {
    const p = node.dataset.path;
    if (p && (path === p || path.startsWith(`${p}.`) || path.startsWith(`${p}[`)) && (!best || p.length > /** @type {string} */ (best.dataset.path).length)) best = node;
  }
  return best;
}

/** @param {string[]} problems @param {string[]} [warnings] */
function showProblems(problems, warnings = []) {
  // Problems make the spec invalid; warnings (an unknown check type, which scoring
  // skips) do not, but sit next to their field the same way so a typo is seen.
  if (savedId && spec && spec.id !== savedId && !problems.includes(ID_FIXED)) problems = [ID_FIXED, ...problems];
  lastProblems = problems;
  lastWarnings = warnings;
  if (!touched) return;
  document.querySelectorAll("#spec-form .field-error, #spec-form .field-warning").forEach((n) => n.remove());
  document.querySelectorAll(".invalid, .suspect").forEach((n) => n.classList.remove("invalid", "suspect"));
  lintList.replaceChildren(
    ...problems.map((p) => el("li", { class: "field-error", text: p })),
    ...warnings.map((w) => el("li", { class: "field-warning", text: `Warning: ${w}` })));
  /** @param {string} message @param {"error" | "warning"} kind */
  const mark = (message, kind) => {
    const path = message.split(": ", 1)[0];
    const field = fieldFor(path);
    if (!field) return;
    field.classList.add(kind === "error" ? "invalid" : "suspect");
    const anchor = field.closest("label") || field;
    anchor.after(el("span", kind === "error"
      ? { class: "field-error", role: "alert", "data-error-for": path, text: message }
      : { class: "field-warning", "data-warning-for": path, text: `Warning: ${message}` }));
  };
  problems.forEach((p) => mark(p, "error"));
  warnings.forEach((w) => mark(w, "warning"));
  if (!problems.length) jsonBox.classList.remove("invalid");
  else if (problems.some((p) => !fieldFor(p.split(": ", 1)[0]))) jsonBox.classList.add("invalid");
  const plural = (/** @type {number} */ n, /** @type {string} */ word) => `${n} ${word}${n > 1 ? "s" : ""}`;
  lintStatus.textContent = (problems.length ? plural(problems.length, "problem") : "Valid")
    + (warnings.length ? ` · ${plural(warnings.length, "warning")}` : "");
}

const lint = debounce(async () => {
  if (spec === null) return;
  const { ok, data } = await postJSON("/api/verifiers/lint", { spec });
  if (ok) showProblems(data.problems, data.warnings || []);
  else showProblems([data.detail || "lint failed"]);
}, 250);

// --- Try it --------------------------------------------------------------------------

/** @param {unknown} value */
function pct(value) { return typeof value === "number" ? value.toFixed(3) : "—"; }

/** The verdict thresholds the panel shows (a run's: 0.8 and 0.6 unless changed). @returns {Thresholds} */
function verdictThresholds() {
  const read = (/** @type {HTMLInputElement} */ box, /** @type {number} */ fallback) => (box.value === "" ? fallback : Number(box.value));
  return { pass: read(passBox, 0.8), borderline: read(borderlineBox, 0.6) };
}

/**
 * Why the score got its verdict: the run thresholds that decide it.
 * @param {ScoreResult} result @param {Thresholds} t
 */
function verdictWhy(result, t) {
  const rule = `run thresholds: pass ≥ ${t.pass}, borderline ≥ ${t.borderline}`;
  // Below pass at a score that reaches borderline: a required check forced it.
  const forced = result.verdict === "fail" && result.score >= t.borderline;
  return forced ? `(a required check failed, whatever the score; ${rule})` : `(${rule})`;
}

/** A spec's passThreshold (1 when it has none). @param {any} source */
function passThresholdIn(source) {
  return typeof source?.passThreshold === "number" ? source.passThreshold : 1;
}

/**
 * The passThreshold of one verifier of a result: the spec's (edited here) or,
 * for a task's row verifier ("row"), the task's.
 * @param {VerifierScore} verifier @param {any} task
 */
function passThresholdOf(verifier, task) {
  return passThresholdIn(verifier.id === "row" && task && typeof task === "object" ? task.verifier : spec);
}

/**
 * `verifier "X" failed (0.657 < passThreshold 1)`: one verifier's passed /
 * failed and what decided it.
 * @param {VerifierScore} verifier @param {any} task
 */
function passedText(verifier, task) {
  const threshold = passThresholdOf(verifier, task);
  const failedRequired = verifier.checks.find((c) => c.required && !c.skipped && c.score < 1);
  const why = failedRequired ? `required check "${failedRequired.id}" scored ${pct(failedRequired.score)}`
    : `${pct(verifier.score)} ${verifier.passed ? "≥" : "<"} passThreshold ${threshold}`;
  return `verifier "${verifier.name || verifier.id}" ${verifier.passed ? "passed" : "failed"} (${why})`;
}

/** @param {ScoreResult} result @param {any} task */
function renderResult(result, task) {
  const thresholds = verdictThresholds();
  const rows = [];
  for (const verifier of result.verifiers) {
    for (const check of verifier.checks) {
      rows.push(el("tr", { class: check.skipped ? "muted" : null },
        el("td", {}, el("code", { text: `${verifier.id}/${check.id}` }),
          el("div", { class: "muted", text: check.required ? `${check.type} · required` : check.type })),
        el("td", { class: "num", text: check.skipped ? "skipped" : pct(check.score) }),
        el("td", { class: "num", text: String(check.weight) }),
        el("td", { class: "reason", text: check.reason || "✓" })));
    }
  }
  // One verifier: its line is the output's passed; several: a line each, then the output's.
  const several = result.verifiers.length > 1;
  resultBox.replaceChildren(
    el("div", { class: "headline" },
      el("span", { class: "big", "data-testid": "try-score", text: pct(result.score) })),
    el("ul", { class: "judgments", "data-testid": "try-judgments" },
      el("li", {}, `score ${pct(result.score)} · verdict `,
        el("span", { class: `verdict-${result.verdict}`, "data-testid": "try-verdict", text: result.verdict }),
        ` ${verdictWhy(result, thresholds)}`),
      ...result.verifiers.map((v) => el("li", { class: v.passed ? "verdict-pass" : "verdict-fail",
        "data-testid": several ? "try-verifier-passed" : "try-passed", text: passedText(v, task) })),
      several ? el("li", { class: result.passed ? "verdict-pass" : "verdict-fail", "data-testid": "try-passed",
        text: result.passed ? "passed: every verifier passed" : "failed: not every verifier passed" }) : null),
    el("table", { class: "data breakdown" },
      el("thead", {}, el("tr", {}, ...["Check", "Score", "Weight", "Reason"].map((h) => el("th", { text: h })))),
      el("tbody", {}, ...rows)),
    el("h3", { text: "Feedback GEPA reads" }),
    el("pre", { "data-testid": "try-feedback", text: result.feedback || "(empty: every check scored 1)" }));
}

const tryIt = debounce(async () => {
  if (spec === null) return;
  if (!outputBox.value && !taskBox.value.trim()) {
    lastResult = null;
    resultBox.replaceChildren(el("p", { class: "muted", text: "Type an output to see its score." }));
    return;
  }
  let task = null;
  if (taskBox.value.trim()) {
    try { task = JSON.parse(taskBox.value); } catch (error) {
      resultBox.replaceChildren(el("p", { class: "field-error", text: `Task JSON: ${/** @type {Error} */ (error).message}` }));
      return;
    }
    // Pasted bare metadata ({"expectations": …}) is the task's metadata.
    const bare = task && typeof task === "object" && !("metadata" in task);
    if (bare && ("expectations" in task || "expectedOutputSchema" in task)) task = { metadata: task };
  }
  const { ok, data } = await postJSON("/api/verifiers/score", { spec, output: outputBox.value, task, thresholds: verdictThresholds() });
  if (ok) {
    lastResult = data;
    renderResult(data, task);
    expectBox.value = data.verdict;
    expectPassedBox.value = data.passed ? "passed" : "failed";
  }
  else resultBox.replaceChildren(el("p", { class: "field-error", text: `Cannot score yet: ${data.detail || "error"}` }),
    ...(data.problems || []).slice(1).map((/** @type {string} */ p) => el("p", { class: "field-error", text: p })));
}, 300);

function changed() {
  lint();
  tryIt();
  runSuite();
}

// --- test cases: saved sample outputs, re-scored on every edit -----------------------

const casesField = /** @type {HTMLInputElement} */ (document.getElementById("test-cases-field"));
const suiteRows = /** @type {HTMLElement} */ (document.getElementById("suite-rows"));
const suiteSummary = /** @type {HTMLElement} */ (document.getElementById("suite-summary"));
const expectBox = /** @type {HTMLSelectElement} */ (document.getElementById("case-expect"));
const expectPassedBox = /** @type {HTMLSelectElement} */ (document.getElementById("case-expect-passed"));
/** @type {TestCase[]} */
let cases = [];
try { cases = JSON.parse(casesField.value || "[]"); } catch { cases = []; }
/** @type {ScoreResult | null} */
let lastResult = null;
let suiteRun = 0;

function taskFromBox() {
  if (!taskBox.value.trim()) return null;
  try { return JSON.parse(taskBox.value); } catch { return undefined; }
}

/**
 * Whether a scored case got what it expects of each judgment ("any" always does).
 * @param {TestCase} c @param {CaseResult} r
 */
function caseMatches(c, r) {
  return {
    verdict: c.expect === "any" || r.verdict === c.expect,
    passed: (c.expect_passed ?? "any") === "any" || (r.passed ? "passed" : "failed") === c.expect_passed,
  };
}

/** @param {Array<CaseResult | undefined>} [results] one per case, as far as they are scored */
function renderSuite(results = []) {
  casesField.value = JSON.stringify(cases);
  /** @type {HTMLElement} */ (document.getElementById("suite-empty")).hidden = cases.length > 0;
  const t = verdictThresholds();
  suiteRows.replaceChildren(...cases.map((c, i) => {
    const r = results[i];
    const match = r && !r.error ? caseMatches(c, r) : null;
    const status = !r ? "…" : r.error ? "error" : match?.verdict && match.passed ? "ok" : "mismatch";
    const mark = (/** @type {boolean} */ ok) => (ok ? "✓" : "✗");
    return el("tr", { class: `case-${status}`, "data-case": String(i) },
      el("td", {}, el("strong", { text: c.name }), el("div", { class: "muted", text: c.output.slice(0, 80) })),
      el("td", { "data-testid": "case-expected" },
        el("div", { text: `verdict ${c.expect}` }), el("div", { text: `verifier ${c.expect_passed ?? "any"}` })),
      el("td", { class: "num", text: r && !r.error ? pct(r.score) : "—" }),
      !r || r.error || !match ? el("td", { "data-testid": "case-status", text: !r ? "…" : `error: ${r.error}` })
        : el("td", { "data-testid": "case-status" },
          el("div", { "data-testid": "case-verdict", class: match.verdict ? "verdict-pass" : "verdict-fail", title: `run thresholds: pass ≥ ${t.pass}, borderline ≥ ${t.borderline}`,
            text: `${mark(match.verdict)} verdict ${r.verdict}` }),
          el("div", { "data-testid": "case-passed", class: match.passed ? "verdict-pass" : "verdict-fail", title: `this verifier's passThreshold: ${passThresholdIn(spec)}`,
            text: `${mark(match.passed)} verifier ${r.passed ? "passed" : "failed"}` })),
      el("td", {}, el("button", { type: "button", class: "link-danger", text: "Remove", onclick: () => { cases.splice(i, 1); touched = true; runSuite(); } })));
  }));
  const done = results.filter(Boolean);
  const passing = cases.filter((c, i) => {
    const r = results[i];
    if (!r || r.error) return false;
    const match = caseMatches(c, r);
    return match.verdict && match.passed;
  }).length;
  suiteSummary.textContent = cases.length && done.length === cases.length ? `${passing} of ${cases.length} as expected` : "";
}

const runSuite = debounce(async () => {
  const run = ++suiteRun;
  renderSuite();
  if (spec === null || !cases.length) return;
  const results = await Promise.all(cases.map(async (c) => {
    const { ok, data } = await postJSON("/api/verifiers/score", { spec, output: c.output, task: c.task, thresholds: verdictThresholds() });
    return ok ? data : { error: data.detail || "cannot score" };
  }));
  if (run === suiteRun) renderSuite(results); // a later edit's run wins
}, 300);

/** @type {HTMLButtonElement} */ (document.getElementById("save-case")).addEventListener("click", () => {
  const task = taskFromBox();
  if (task === undefined) { resultBox.prepend(el("p", { class: "field-error", text: "Task JSON: fix it before saving a test case" })); return; }
  const caseName = /** @type {HTMLInputElement} */ (document.getElementById("case-name"));
  const name = caseName.value.trim() || `case ${cases.length + 1}`;
  cases.push({ name, output: outputBox.value, task, expect: expectBox.value, expect_passed: expectPassedBox.value });
  caseName.value = "";
  touched = true;
  runSuite();
});

/** @param {string} url @returns {Promise<any>} the server's JSON, or null when it refused */
async function getJSON(url) {
  const response = await fetch(url, { credentials: "same-origin" });
  return response.ok ? response.json() : null;
}

/** @type {Task[]} */
let tasks = [];

async function loadTaskSets() {
  const sets = await getJSON("/api/tasksets/");
  for (const set of sets || []) tasksetSelect.append(el("option", { value: set.id, text: `${set.name} (${set.task_count})` }));
}

tasksetSelect.addEventListener("change", async () => {
  taskSelect.replaceChildren(el("option", { value: "", text: "—" }));
  taskSelect.disabled = !tasksetSelect.value;
  if (!tasksetSelect.value) return;
  const detail = await getJSON(`/api/tasksets/${encodeURIComponent(tasksetSelect.value)}?limit=500`);
  tasks = detail ? detail.tasks : [];
  tasks.forEach((task, i) => taskSelect.append(el("option", { value: i, text: `${task.task_id} · ${task.input.slice(0, 60)}` })));
});

taskSelect.addEventListener("change", () => {
  const task = tasks[Number(taskSelect.value)];
  if (!task || taskSelect.value === "") return;
  /** @type {Record<string, unknown>} */
  const row = { task_id: task.task_id, expected: task.expected, params: task.params, metadata: task.metadata };
  if (task.verifier) row.verifier = task.verifier;
  taskBox.value = JSON.stringify(row, null, 2);
  tryIt();
});

jsonBox.addEventListener("input", () => { touched = true; fromJSON(); });
taskBox.addEventListener("input", tryIt);
outputBox.addEventListener("input", tryIt);
// The verdict thresholds are a run's, shown here for the preview: changing them re-judges both.
for (const box of [passBox, borderlineBox]) box.addEventListener("input", () => { tryIt(); runSuite(); });
const fileInput = /** @type {HTMLInputElement | null} */ (document.querySelector("input[name=spec_file]"));
if (fileInput) {
  // Importing a file loads it into the editor, so it is validated and tried before saving.
  fileInput.addEventListener("change", async () => {
    const file = /** @type {FileList} */ (fileInput.files)[0];
    if (!file) return;
    jsonBox.value = await file.text();
    fileInput.value = "";
    touched = true;
    fromJSON();
  });
}

fromJSON();
loadTaskSets();

// Saving a spec lint warns about (an unknown check type: scoring would skip it,
// its weight gone) asks first; the page says it again after the save.
form.addEventListener("submit", (event) => {
  if (!lastWarnings.length) return;
  const question = `${lastWarnings.length === 1 ? "This verifier has a warning" : `This verifier has ${lastWarnings.length} warnings`}:\n\n`
    + lastWarnings.map((w) => `• ${w}`).join("\n") + "\n\nSave it anyway?";
  if (!window.confirm(question)) event.preventDefault();
});
