// @ts-check
// The launch form: builds the RunConfig JSON (optimizer/config.py) from the
// fields, posts it for a dry run or a launch, and lists each problem next to
// the field its path names (the longest matching data-problems-for prefix).
import { money, tokens } from "./money.js";

/**
 * A problem the server found, with the config path it names.
 * @typedef {{field: string, message: string}} Problem
 */

/**
 * What the dry run, the launch and the plan endpoints answer (dashboard/pages/runs.py).
 * @typedef {object} Answer
 * @property {Problem[]} problems
 * @property {string[]} warnings
 * @property {Plan | null} [plan]
 * @property {string} [redirect] a launched run's page
 */

/**
 * What the run will do (optimizer/runs/plan.py run_plan): [low, high] ranges.
 * @typedef {object} Plan
 * @property {Record<string, number>} splits split → tasks
 * @property {number} minibatch_size
 * @property {Record<string, {metric_calls: number, proposals: number}>} presets
 * @property {{metric_calls: number, max_cost: number | null, iteration_cost: number}} budget
 * @property {[number, number]} iterations
 * @property {{task: [number, number], reflection: [number, number], judge: [number, number]}} calls
 * @property {[number, number]} tokens
 * @property {[number, number]} cost
 * @property {boolean} free
 * @property {[number, number]} seconds
 * @property {{tokens_in: number, tokens_out: number, latency_ms: number, source: string}} per_task_call
 * @property {HoldoutPlan | null} holdout the held-out evaluation at the end; null when there is none
 * @property {string[]} warnings
 */

/**
 * The seed and the best candidate scored on the held-out split when the run ends:
 * apart from the metric-call budget, inside the cost cap.
 * @typedef {object} HoldoutPlan
 * @property {string} split
 * @property {number} tasks
 * @property {number} evaluations at most 2 × tasks (one set when the best is the seed)
 * @property {{task: [number, number], judge: [number, number]}} calls
 * @property {[number, number]} tokens
 * @property {[number, number]} cost
 * @property {[number, number]} seconds
 */

/**
 * A named field of the form: an input, a select or a textarea.
 * @typedef {HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement} Field
 */

/**
 * The form's data attributes (templates/runs/new.html).
 * @typedef {{demoChoice: string, planUrl: string, dryRunUrl: string}} LaunchFormData
 */

const form = /** @type {HTMLFormElement & {dataset: LaunchFormData}} */ (document.getElementById("launch-form"));
const components = /** @type {HTMLElement} */ (document.getElementById("components"));
const result = /** @type {HTMLElement} */ (form.querySelector('[data-field="dry-run-result"]'));
const csrf = /** @type {HTMLInputElement} */ (form.querySelector("[name=csrfmiddlewaretoken]")).value;

const value = (/** @type {string} */ name) => (/** @type {Field | null} */ (form.elements.namedItem(name))?.value ?? "").trim();
const checked = (/** @type {string} */ name) => !!/** @type {HTMLInputElement | null} */ (form.elements.namedItem(name))?.checked;
const number = (/** @type {string} */ name) => (value(name) === "" ? undefined : Number(value(name)));

function aggregator() {
  const type = value("aggregator.type");
  if (type === "safety_gate") {
    return { type, required: value("aggregator.required").split(",").map((s) => s.trim()).filter(Boolean) };
  }
  if (type === "all_or_nothing" && value("aggregator.threshold") !== "") return { type, threshold: number("aggregator.threshold") };
  return type;
}

function seedComponents() {
  /** @type {Record<string, string>} */
  const out = {};
  for (const block of components.querySelectorAll(".component")) {
    const name = /** @type {HTMLInputElement} */ (block.querySelector("[name='component.name']")).value.trim();
    out[name] = /** @type {HTMLTextAreaElement} */ (block.querySelector("[name='component.text']")).value;
  }
  return out;
}

// The demo simulator is a full LM config, not an endpoint name.
/** @param {string} field @param {string} model */
function lm(field, model) {
  const name = value(field);
  if (name !== form.dataset.demoChoice) return name;
  return { provider: "demo", model, simulated_latency_ms: number("simulated_latency_ms") ?? 0 };
}

export function buildConfig() {
  const preset = value("budget.preset");
  const config = {
    name: value("name"),
    task_set_id: number("task_set_id"),
    splits: { train: value("splits.train"), val: value("splits.val"), holdout: value("splits.holdout") || null },
    verifier_ids: [.../** @type {NodeListOf<HTMLInputElement>} */ (form.querySelectorAll("[name=verifier_ids]:checked"))].map((box) => box.value),
    aggregator: aggregator(),
    thresholds: { pass: number("thresholds.pass"), borderline: number("thresholds.borderline") },
    task_lm: lm("task_lm", "demo-task"),
    reflection_lm: lm("reflection_lm", "demo-reflection"),
    seed_components: seedComponents(),
    budget: { ...(preset ? { preset } : { max_metric_calls: number("budget.max_metric_calls") ?? null }), max_cost: number("budget.max_cost") || null },
    candidate_selection: value("candidate_selection"),
    frontier_type: value("frontier_type"),
    minibatch_size: number("minibatch_size"),
    use_merge: checked("use_merge"),
    max_merge_invocations: number("max_merge_invocations"),
    concurrency: number("concurrency"),
    parallel_proposals: number("parallel_proposals"),
    seed: number("seed"),
    evaluate_holdout: checked("evaluate_holdout"),
    verify: { enabled: checked("verify.enabled"), judge: value("verify.judge"), max_verify: number("verify.max_verify") },
    early_stop: {
      at_perfect_score: checked("early_stop.at_perfect_score"),
      after_iterations_without_improvement: number("early_stop.after_iterations_without_improvement") ?? null,
    },
  };
  if (config.verify.judge === "llm") /** @type {Record<string, unknown>} */ (config.verify).judge_lm = config.reflection_lm;
  return config;
}

/** @param {string} field @returns {HTMLElement} */
function slot(field) {
  // A task row's own problem ("task q3": its row verifier or expectations) belongs to the task set.
  // The template has a slot for the task set and one for the whole config.
  if (field.startsWith("task ")) return /** @type {HTMLElement} */ (form.querySelector('[data-problems-for="task_set_id"]'));
  const parts = field.split(".");
  for (let n = parts.length; n > 0; n -= 1) {
    const el = /** @type {HTMLElement | null} */ (form.querySelector(`[data-problems-for="${CSS.escape(parts.slice(0, n).join("."))}"]`));
    if (el) return el;
  }
  return /** @type {HTMLElement} */ (form.querySelector('[data-problems-for="config"]'));
}

/** @param {Problem[]} [problems] @param {string[]} [warnings] */
function showProblems(problems = [], warnings = []) {
  for (const el of /** @type {NodeListOf<HTMLElement>} */ (form.querySelectorAll("[data-problems-for]"))) { el.replaceChildren(); el.hidden = true; }
  /** @param {HTMLElement} el @param {string} text */
  const add = (el, text) => {
    if (el.childNodes.length) el.append(document.createElement("br"));
    el.append(text);
    el.hidden = false;
  };
  for (const p of problems) add(slot(p.field), `${p.field}: ${p.message}`);
  for (const w of warnings) add(/** @type {HTMLElement} */ (form.querySelector('[data-problems-for="budget.warning"]')), w);
  // An empty split can be fixed from here: offer the task set's seeded split.
  splitNow.hidden = !problems.some((p) => p.field.startsWith("splits.") && p.message.includes("has no tasks in split"));
}

const splitNow = /** @type {HTMLElement} */ (form.querySelector("[data-split-now]"));
/** @type {HTMLElement} */ (splitNow.querySelector('[data-action="split-now"]')).addEventListener("click", async () => {
  const status = /** @type {HTMLElement} */ (splitNow.querySelector('[data-field="split-now-result"]'));
  const setId = /** @type {HTMLSelectElement} */ (form.elements.namedItem("task_set_id")).value;
  const url = /** @type {string} */ (splitNow.dataset.splitUrl).replace("/0/", `/${encodeURIComponent(setId)}/`);
  const body = new URLSearchParams({ seed: "0" }); // no ratios: the default rule deals them
  status.textContent = "splitting…";
  const response = await fetch(url, { method: "POST", headers: { "X-CSRFToken": csrf }, body });
  if (!response.ok) {
    status.textContent = response.status === 404
      ? "only the owner can split this set: duplicate it from its page, then split the copy"
      : `the server answered ${response.status}; nothing was split`;
    return;
  }
  status.textContent = "";
  /** @type {HTMLButtonElement} */ (form.querySelector('[data-action="dry-run"]')).click();
});

// Components are a name → text map: a second component with the same name would
// silently replace the first, so it is refused here, next to the components.
function duplicateComponentNames() {
  const seen = new Set(), twice = new Set();
  for (const input of /** @type {NodeListOf<HTMLInputElement>} */ (components.querySelectorAll("[name='component.name']"))) {
    const name = input.value.trim();
    if (seen.has(name)) twice.add(name);
    seen.add(name);
  }
  return [...twice];
}

// ---- the plan: what the run will do, refreshed as the form changes ----------------

const planBox = /** @type {HTMLElement} */ (form.querySelector('[data-field="plan"]'));
/** @param {[number, number]} range @param {(n: number) => string} [show] */
const range = ([low, high], show = String) => (low === high ? show(low) : `${show(low)} – ${show(high)}`);
const seconds = (/** @type {number} */ s) => (s >= 3600 ? `${(s / 3600).toFixed(1)} h` : s >= 60 ? `${Math.round(s / 60)} min` : `${Math.round(s)} s`);

/** @param {Plan | null | undefined} plan */
export function renderPlan(plan) {
  if (!plan) { planBox.replaceChildren(Object.assign(document.createElement("p"), { className: "muted", textContent: "Fix the problems above to see the plan." })); return; }
  const list = document.createElement("dl");
  list.className = "plan-list";
  const add = (/** @type {string} */ term, /** @type {string} */ text) => { list.append(Object.assign(document.createElement("dt"), { textContent: term }), Object.assign(document.createElement("dd"), { textContent: text })); };
  const s = plan.splits;
  add("Splits", Object.entries(s).map(([k, n]) => `${k} ${n}`).join(" · ") + ` · minibatch ${plan.minibatch_size}`);
  add("Presets", Object.entries(plan.presets).map(([k, p]) => `${k}: ${p.metric_calls} calls (${p.proposals} proposals)`).join(" · "));
  add("Budget", `${plan.budget.metric_calls} metric calls (one iteration: up to ${plan.budget.iteration_cost})` + (plan.budget.max_cost ? ` · cost cap ${plan.budget.max_cost}` : ""));
  add("Iterations", range(plan.iterations));
  add("Model calls", `task ${range(plan.calls.task)} · reflection ${range(plan.calls.reflection)}` + (plan.calls.judge[1] ? ` · judge ${range(plan.calls.judge)}` : ""));
  add("Tokens", range(plan.tokens, tokens) + ` (per task call ≈ ${plan.per_task_call.tokens_in} in / ${plan.per_task_call.tokens_out} out, from ${plan.per_task_call.source})`);
  add("Cost", plan.free ? money(0, "simulator") : range(plan.cost, (c) => money(c)));
  add("Wall time", range(plan.seconds, seconds) + (plan.per_task_call.latency_ms ? ` (${plan.per_task_call.latency_ms} ms per task call)` : ""));
  const h = plan.holdout;
  add("Held-out", h
    ? `at the end: seed and best on the ${h.split} split, ${h.evaluations} evaluations (2 × ${h.tasks} tasks), not metric calls · task calls ${range(h.calls.task)}`
      + (h.calls.judge[1] ? ` · judge ${range(h.calls.judge)}` : "") + ` · ${plan.free ? money(0, "simulator") : range(h.cost, (c) => money(c))} · ${range(h.seconds, seconds)}`
    : "none: no held-out split (or the switch is off), so the val lift goes unchecked");
  /** @type {HTMLElement[]} */
  const children = [list];
  for (const w of plan.warnings) children.push(Object.assign(document.createElement("p"), { className: "warning", textContent: w }));
  planBox.replaceChildren(...children);
}

/** @type {ReturnType<typeof setTimeout> | undefined} */
let planTimer;
let planAsked = 0;
function refreshPlan() {
  clearTimeout(planTimer);
  planTimer = setTimeout(async () => {
    const asked = ++planAsked;
    const response = await fetch(form.dataset.planUrl, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrf, Accept: "application/json" },
      body: JSON.stringify(buildConfig()),
    }).catch(() => null);
    if (!response || !response.ok || asked !== planAsked) return; // a newer answer is on its way
    renderPlan((await response.json()).plan);
  }, 250);
}
form.addEventListener("input", refreshPlan);
form.addEventListener("change", refreshPlan);
refreshPlan();

/** @param {string} url @returns {Promise<Answer>} */
async function post(url) {
  const twice = duplicateComponentNames();
  if (twice.length) {
    return { problems: twice.map((name) => ({ field: "seed_components", message: `two components are named "${name}": rename one` })), warnings: [] };
  }
  const response = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", "X-CSRFToken": csrf, Accept: "application/json" },
    body: JSON.stringify(buildConfig()),
  });
  if (!(response.headers.get("Content-Type") || "").includes("application/json")) {
    // A server error page or an expired session: say so instead of hanging on "checking…".
    return { problems: [{ field: "config", message: `the server answered ${response.status} ${response.statusText}; reload the page and try again` }], warnings: [] };
  }
  return response.json();
}

/** @type {HTMLButtonElement} */ (form.querySelector('[data-action="dry-run"]')).addEventListener("click", async () => {
  result.textContent = "checking…";
  const body = await post(form.dataset.dryRunUrl);
  showProblems(body.problems, body.warnings);
  if (body.plan !== undefined) renderPlan(body.plan);
  result.textContent = body.problems.length ? `${body.problems.length} problem(s) found` : "dry run passed: ready to launch";
});

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  result.textContent = "launching…";
  const body = await post(form.action);
  if (body.redirect) { window.location.href = body.redirect; return; }
  showProblems(body.problems, body.warnings);
  result.textContent = `${body.problems.length} problem(s): nothing was launched`;
});

function addComponent(name = `component_${components.children.length + 1}`, text = "") {
  const block = /** @type {HTMLElement} */ (/** @type {HTMLElement} */ (components.querySelector(".component")).cloneNode(true));
  /** @type {HTMLInputElement} */ (block.querySelector("[name='component.name']")).value = name;
  /** @type {HTMLTextAreaElement} */ (block.querySelector("[name='component.text']")).value = text;
  components.append(block);
}

/** @type {HTMLButtonElement} */ (form.querySelector('[data-action="add-component"]')).addEventListener("click", () => addComponent());

// A fork opens the form filled with the parent run's config (view: ?fork=&candidate=):
// the inverse of buildConfig, field by field; the user edits it before launching.
/** @param {string} name @param {unknown} v */
function setField(name, v) {
  const field = /** @type {Field | null} */ (form.elements.namedItem(name));
  if (!field || v === undefined || v === null) return;
  if (field.type === "checkbox") /** @type {HTMLInputElement} */ (field).checked = !!v;
  else field.value = String(v);
}

/** @param {string} field @param {string | {provider: string, simulated_latency_ms?: number}} [ref] an endpoint name or an LM config */
function setLm(field, ref) {
  if (ref && typeof ref === "object" && ref.provider === "demo") {
    setField(field, form.dataset.demoChoice);
    setField("simulated_latency_ms", ref.simulated_latency_ms ?? 0);
  } else if (typeof ref === "string" && [.../** @type {HTMLSelectElement} */ (form.elements.namedItem(field)).options].some((o) => o.value === ref)) {
    setField(field, ref);
  } else {
    showProblems([{ field, message: "the parent run's model is not an endpoint of this installation: pick one" }]);
  }
}

/** @param {Record<string, any>} c a RunConfig (optimizer/config.py), as buildConfig makes it */
export function applyConfig(c) {
  setField("name", c.name);
  setField("task_set_id", c.task_set_id);
  for (const split of ["train", "val", "holdout"]) setField(`splits.${split}`, (c.splits || {})[split] ?? "");
  const verifiers = new Set(c.verifier_ids || []);
  for (const box of /** @type {NodeListOf<HTMLInputElement>} */ (form.querySelectorAll("[name=verifier_ids]"))) box.checked = verifiers.has(box.value);
  const agg = c.aggregator || "weighted_average";
  setField("aggregator.type", typeof agg === "string" ? agg : agg.type);
  if (typeof agg === "object") { setField("aggregator.required", (agg.required || []).join(", ")); setField("aggregator.threshold", agg.threshold); }
  setField("thresholds.pass", (c.thresholds || {}).pass);
  setField("thresholds.borderline", (c.thresholds || {}).borderline);
  setLm("task_lm", c.task_lm);
  setLm("reflection_lm", c.reflection_lm);
  const entries = Object.entries(c.seed_components || {});
  if (entries.length) {
    [...components.querySelectorAll(".component")].slice(1).forEach((b) => b.remove());
    const first = /** @type {HTMLElement} */ (components.querySelector(".component"));
    /** @type {HTMLInputElement} */ (first.querySelector("[name='component.name']")).value = entries[0][0];
    /** @type {HTMLTextAreaElement} */ (first.querySelector("[name='component.text']")).value = entries[0][1];
    for (const [name, text] of entries.slice(1)) addComponent(name, text);
  }
  const budget = c.budget || {};
  setField("budget.preset", budget.preset || "");
  setField("budget.max_metric_calls", budget.max_metric_calls ?? "");
  for (const name of ["candidate_selection", "frontier_type", "minibatch_size", "use_merge", "max_merge_invocations", "concurrency", "seed"]) setField(name, c[name]);
  setField("evaluate_holdout", c.evaluate_holdout ?? true);
  const verify = c.verify || {};
  setField("verify.enabled", verify.enabled);
  setField("verify.judge", verify.judge);
  setField("verify.max_verify", verify.max_verify);
}

const prefill = document.getElementById("launch-prefill");
if (prefill) applyConfig(JSON.parse(prefill.textContent));

components.addEventListener("click", (event) => {
  const target = /** @type {HTMLElement} */ (event.target);
  if (target.dataset.action !== "remove-component") return;
  if (components.children.length > 1) /** @type {HTMLElement} */ (target.closest(".component")).remove();
  else showProblems([{ field: "seed_components", message: "needs at least one named component" }]);
});
