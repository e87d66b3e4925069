// The launch form: builds the RunConfig JSON (optimizer/config.py) from the
// fields, posts it for a dry run or a launch, and lists each problem next to
// the field its path names (the longest matching data-problems-for prefix).
const form = document.getElementById("launch-form");
const components = document.getElementById("components");
const result = form.querySelector('[data-field="dry-run-result"]');
const csrf = form.querySelector("[name=csrfmiddlewaretoken]").value;

const value = (name) => (form.elements.namedItem(name)?.value ?? "").trim();
const checked = (name) => !!form.elements.namedItem(name)?.checked;
const number = (name) => (value(name) === "" ? undefined : Number(value(name)));

function aggregator() {
  const type = value("aggregator.type");
  if (type === "safety_gate") {
    return { type, required: value("aggregator.required").split(",").map((s) => s.trim()).filter(Boolean) };
  }
  if (type === "all_or_nothing" && value("aggregator.threshold") !== "") return { type, threshold: number("aggregator.threshold") };
  return type;
}

function seedComponents() {
  const out = {};
  for (const block of components.querySelectorAll(".component")) {
    const name = block.querySelector("[name='component.name']").value.trim();
    out[name] = block.querySelector("[name='component.text']").value;
  }
  return out;
}

// The demo simulator is a full LM config, not an endpoint name.
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
    verifier_ids: [...form.querySelectorAll("[name=verifier_ids]:checked")].map((box) => box.value),
    aggregator: aggregator(),
    thresholds: { pass: number("thresholds.pass"), borderline: number("thresholds.borderline") },
    task_lm: lm("task_lm", "demo-task"),
    reflection_lm: lm("reflection_lm", "demo-reflection"),
    seed_components: seedComponents(),
    budget: preset ? { preset } : { max_metric_calls: number("budget.max_metric_calls") ?? null },
    candidate_selection: value("candidate_selection"),
    frontier_type: value("frontier_type"),
    minibatch_size: number("minibatch_size"),
    use_merge: checked("use_merge"),
    max_merge_invocations: number("max_merge_invocations"),
    concurrency: number("concurrency"),
    parallel_proposals: number("parallel_proposals"),
    seed: number("seed"),
    verify: { enabled: checked("verify.enabled"), judge: value("verify.judge"), max_verify: number("verify.max_verify") },
  };
  if (config.verify.judge === "llm") config.verify.judge_lm = config.reflection_lm;
  return config;
}

function slot(field) {
  // A task row's own problem ("task q3": its row verifier or expectations) belongs to the task set.
  if (field.startsWith("task ")) return form.querySelector('[data-problems-for="task_set_id"]');
  const parts = field.split(".");
  for (let n = parts.length; n > 0; n -= 1) {
    const el = form.querySelector(`[data-problems-for="${CSS.escape(parts.slice(0, n).join("."))}"]`);
    if (el) return el;
  }
  return form.querySelector('[data-problems-for="config"]');
}

function showProblems(problems = [], warnings = []) {
  for (const el of form.querySelectorAll("[data-problems-for]")) { el.replaceChildren(); el.hidden = true; }
  const add = (el, text) => {
    if (el.childNodes.length) el.append(document.createElement("br"));
    el.append(text);
    el.hidden = false;
  };
  for (const p of problems) add(slot(p.field), `${p.field}: ${p.message}`);
  for (const w of warnings) add(form.querySelector('[data-problems-for="budget.warning"]'), w);
  // An empty split can be fixed from here: offer the task set's seeded split.
  splitNow.hidden = !problems.some((p) => p.field.startsWith("splits.") && p.message.includes("has no tasks in split"));
}

const splitNow = form.querySelector("[data-split-now]");
splitNow.querySelector('[data-action="split-now"]').addEventListener("click", async () => {
  const status = splitNow.querySelector('[data-field="split-now-result"]');
  const setId = form.elements.task_set_id.value;
  const url = splitNow.dataset.splitUrl.replace("/0/", `/${encodeURIComponent(setId)}/`);
  const body = new URLSearchParams({ train: "0.6", val: "0.4", holdout: "0", seed: "0" });
  status.textContent = "splitting…";
  const response = await fetch(url, { method: "POST", headers: { "X-CSRFToken": csrf }, body });
  if (!response.ok) {
    status.textContent = response.status === 404
      ? "only the owner can split this set: duplicate it from its page, then split the copy"
      : `the server answered ${response.status}; nothing was split`;
    return;
  }
  status.textContent = "";
  form.querySelector('[data-action="dry-run"]').click();
});

// Components are a name → text map: a second component with the same name would
// silently replace the first, so it is refused here, next to the components.
function duplicateComponentNames() {
  const seen = new Set(), twice = new Set();
  for (const input of components.querySelectorAll("[name='component.name']")) {
    const name = input.value.trim();
    if (seen.has(name)) twice.add(name);
    seen.add(name);
  }
  return [...twice];
}

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

form.querySelector('[data-action="dry-run"]').addEventListener("click", async () => {
  result.textContent = "checking…";
  const body = await post(form.dataset.dryRunUrl);
  showProblems(body.problems, body.warnings);
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
  const block = components.querySelector(".component").cloneNode(true);
  block.querySelector("[name='component.name']").value = name;
  block.querySelector("[name='component.text']").value = text;
  components.append(block);
}

form.querySelector('[data-action="add-component"]').addEventListener("click", () => addComponent());

// A fork opens the form filled with the parent run's config (view: ?fork=&candidate=):
// the inverse of buildConfig, field by field; the user edits it before launching.
function setField(name, v) {
  const field = form.elements.namedItem(name);
  if (!field || v === undefined || v === null) return;
  if (field.type === "checkbox") field.checked = !!v;
  else field.value = String(v);
}

function setLm(field, ref) {
  if (ref && typeof ref === "object" && ref.provider === "demo") {
    setField(field, form.dataset.demoChoice);
    setField("simulated_latency_ms", ref.simulated_latency_ms ?? 0);
  } else if (typeof ref === "string" && [...form.elements.namedItem(field).options].some((o) => o.value === ref)) {
    setField(field, ref);
  } else {
    showProblems([{ field, message: "the parent run's model is not an endpoint of this installation: pick one" }]);
  }
}

export function applyConfig(c) {
  setField("name", c.name);
  setField("task_set_id", c.task_set_id);
  for (const split of ["train", "val", "holdout"]) setField(`splits.${split}`, (c.splits || {})[split] ?? "");
  const verifiers = new Set(c.verifier_ids || []);
  for (const box of form.querySelectorAll("[name=verifier_ids]")) box.checked = verifiers.has(box.value);
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
    const first = components.querySelector(".component");
    first.querySelector("[name='component.name']").value = entries[0][0];
    first.querySelector("[name='component.text']").value = entries[0][1];
    for (const [name, text] of entries.slice(1)) addComponent(name, text);
  }
  const budget = c.budget || {};
  setField("budget.preset", budget.preset || "");
  setField("budget.max_metric_calls", budget.max_metric_calls ?? "");
  for (const name of ["candidate_selection", "frontier_type", "minibatch_size", "use_merge", "max_merge_invocations", "concurrency", "seed"]) setField(name, c[name]);
  const verify = c.verify || {};
  setField("verify.enabled", verify.enabled);
  setField("verify.judge", verify.judge);
  setField("verify.max_verify", verify.max_verify);
}

const prefill = document.getElementById("launch-prefill");
if (prefill) applyConfig(JSON.parse(prefill.textContent));

components.addEventListener("click", (event) => {
  if (event.target.dataset.action !== "remove-component") return;
  if (components.children.length > 1) event.target.closest(".component").remove();
  else showProblems([{ field: "seed_components", message: "needs at least one named component" }]);
});
