// The run page: draws the JSON snapshot, then applies websocket events in
// place (Plotly.extendTraces / restyle on the trace that changed; react only
// for the small scatter and verdict figures). Every untrusted string reaches
// the DOM through textContent and Plotly through esc().
import { LiveSocket } from "./live-socket.js";
import { COLORS, plot, scoreAxis } from "./charts.js";
import { frontMembers } from "./front.js";
import { wireCopyButtons } from "./clipboard.js";
import { money, tokens } from "./money.js";

const root = document.getElementById("run-page");
const candidateUrl = (index) => root.dataset.candidateUrl.replace(/\/0\/$/, `/${index}/`);
const VERDICT_NAMES = { p: "pass", b: "borderline", f: "fail" };
// The top margin holds Plotly's toolbar, which appears on hover: with less, it
// covered the points at score 1.000 (the top edge of the [0, 1] axes).
const MARGIN = { l: 50, r: 10, t: 34, b: 40 };

// Plotly renders hover text, tick labels and titles as HTML-ish markup (<b>,
// <a href>, <br> …): escape every untrusted string before it goes there. With
// no "<" left there is no tag, so quotes need no escaping (and Plotly would
// show "&quot;" literally: it decodes only a few named entities).
export function esc(value) {
  return String(value ?? "").replace(/[&<>]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;" })[c]);
}
const escLines = (value) => esc(value).replace(/\n/g, "<br>");
const fmt = (x, digits = 3) => (x === null || x === undefined || Number.isNaN(x) ? "–" : Number(x).toFixed(digits));
const clip = (text, n) => (text.length > n ? text.slice(0, n - 1) + "…" : text);
const $ = (field) => root.querySelector(`[data-field="${field}"]`);

const S = {
  run: null, tasks: [], taskColumn: new Map(), verifiers: [],
  byIndex: new Map(), order: [], members: new Set(), leaders: {},
  // The heatmap's rows: candidates whose per-task scores the page holds (a big
  // run's snapshot sends the front and the top ones; "more rows" fetches others).
  rows: [], rowsCursor: -1, rowsDone: true,
  best: -Infinity, selected: new Set(), finishedAt: null, limits: null, shownBest: null,
};

// Redraws that depend on the whole pool (restyles, the scatter's front, the
// verdict bars) run at most once per animation frame, however many events
// arrive in it (a reconnect replays hundreds at once).
const pendingDraws = new Set();
function later(draw) {
  if (!pendingDraws.size) requestAnimationFrame(() => { const draws = [...pendingDraws]; pendingDraws.clear(); draws.forEach((d) => d()); });
  pendingDraws.add(draw);
}

// ---- model ---------------------------------------------------------------------

function addCandidate(c) {
  S.byIndex.set(c.index, c);
  S.order.push(c.index);
  if (c.scores) S.rows.push(c.index);
}

function candidateFromEvent(d) {
  const preview = Object.entries(d.components || {}).map(([name, text]) => `[${name}]\n${text}`).join("\n\n");
  return {
    index: d.index, parents: d.parents || [], origin: d.origin, iteration: d.iteration,
    metric_calls: d.metric_calls, val_score: d.val_score, objective_scores: d.objective_scores || {},
    on_front: false, prompt_tokens: d.prompt_tokens, mean_output_tokens: d.mean_output_tokens,
    mean_latency_ms: d.mean_latency_ms, preview: clip(preview, S.limits.preview), cost: d.cost ?? 0,
    // Rounded as the snapshot's score matrix is, so a live page and a reload draw the same front.
    scores: S.tasks.map((key) => (key in (d.task_scores || {}) ? Math.round(d.task_scores[key] * 1000) / 1000 : null)),
    verdicts: S.tasks.map((key) => ({ pass: "p", borderline: "b", fail: "f" })[(d.verdicts || {})[key]] || "-").join(""),
  };
}

function bestIndex() {
  if (S.run.best_index !== null && S.run.best_index !== undefined && S.byIndex.has(S.run.best_index)) return S.run.best_index;
  let best = null;
  for (const i of S.order) if (best === null || S.byIndex.get(i).val_score > S.byIndex.get(best).val_score) best = i;
  return best;
}

function leadCount(index) {
  if (!S.byIndex.get(index)?.scores) return null; // not a heatmap row: its scores are not loaded
  let n = 0;
  for (const group of Object.values(S.leaders)) if (group.includes(index)) n += 1;
  return n;
}

function role(index) {
  if (index === bestIndex()) return "best";
  return S.members.has(index) ? "front" : "other";
}

function hover(c) {
  const parents = c.parents.length ? c.parents.map((p) => `#${p}`).join(" + ") : "none";
  return `<b>#${c.index}</b> ${esc(c.origin)} · val ${fmt(c.val_score)}<br>parents ${parents} · ${c.metric_calls} calls<br>${escLines(c.preview)}`;
}

// ---- header ----------------------------------------------------------------------

function renderHeader() {
  const r = S.run;
  const status = $("status");
  status.textContent = r.status;
  status.className = `status status-${r.status}`;
  $("phase").textContent = r.phase || "";
  const seed = r.seed_score ?? S.byIndex.get(0)?.val_score ?? null;
  const bi = bestIndex();
  const best = bi === null ? r.best_score : Math.max(r.best_score ?? -Infinity, S.byIndex.get(bi).val_score);
  $("best").textContent = best === null || best === -Infinity ? "–" : fmt(best);
  const delta = $("delta");
  if (seed !== null && best !== null && best !== -Infinity) {
    const d = best - seed;
    delta.textContent = `(${d >= 0 ? "+" : ""}${fmt(d)} vs seed)`;
    delta.className = d >= 0 ? "delta-up" : "delta-down";
  }
  const pct = r.budget_total ? Math.min(100, (100 * r.budget_used) / r.budget_total) : 0;
  $("budget-bar").firstElementChild.style.width = `${pct}%`;
  $("budget").textContent = `${r.budget_used} / ${r.budget_total}`;
  $("cost").textContent = money(r.cost, r.pricing);
  $("tokens").textContent = `${tokens(r.tokens)} tokens`;
  // Task model vs reflection model (and the verify judge): who spent what.
  $("cost-split").textContent = ["task", "reflection", "judge"]
    .filter((role) => r.usage?.[role]?.calls)
    .map((role) => { const u = r.usage[role]; return `${role} ${u.calls} calls · ${tokens(u.tokens_in)} in / ${tokens(u.tokens_out)} out · ${money(u.cost, r.pricing)}`; })
    .join(" | ");
  $("stop-reason").textContent = r.stop_reason || "–";
  for (const control of root.querySelectorAll("[data-when]")) control.hidden = (control.dataset.when === "active") !== r.active;
  $("error").textContent = r.error || "";
  $("error-panel").hidden = !r.error;
  renderClock();
}

function renderClock() {
  const r = S.run;
  if (!r.started_at) return;
  const start = Date.parse(r.started_at);
  const end = r.finished_at ? Date.parse(r.finished_at) : r.active ? Date.now() : S.finishedAt || Date.now();
  const seconds = Math.max(0, (end - start) / 1000);
  $("elapsed").textContent = duration(seconds);
  const left = r.budget_total - r.budget_used;
  // The worker's own estimate (its observed pace, concurrency included) when it sent one.
  const eta = r.eta_seconds ?? (r.budget_used > 0 ? (seconds * left) / r.budget_used : null);
  $("eta").textContent = r.active && eta !== null && left > 0 ? `ETA ${duration(eta)}` : "";
  renderClient();
}

// An external run's tracker reports from its owner's process: say when it was
// last heard from, when it went silent, and when it finished.
function renderClient() {
  const r = S.run, field = $("client");
  if (r.kind !== "external" || !field) return;
  let text, state;
  if (!r.active) {
    const at = r.finished_at ? Date.parse(r.finished_at) : S.finishedAt;
    [text, state] = [`finished (${r.status})${at ? ` at ${new Date(at).toLocaleTimeString()}` : ""}`, "finished"];
  } else if (!r.client_seen_at) {
    [text, state] = ["not heard from yet", "silent"];
  } else {
    const age = Math.max(0, (Date.now() - Date.parse(r.client_seen_at)) / 1000);
    const silent = age > r.silent_after;
    [text, state] = [silent ? `silent for ${duration(age)}: the tracker's process stopped reporting` : `heard from ${duration(age)} ago`, silent ? "silent" : "live"];
  }
  field.textContent = text;
  field.dataset.state = state;
}

async function pollClient() {
  if (S.run.kind !== "external" || !S.run.active) return;
  try {
    const response = await fetch(root.dataset.clientUrl, { headers: { Accept: "application/json" } });
    if (response.ok) Object.assign(S.run, await response.json());
  } catch { /* the next poll tries again */ }
  renderClient();
}

function duration(seconds) {
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return h ? `${h}h ${m}m` : m ? `${m}m ${s % 60}s` : `${s % 60}s`;
}

// ---- explainer card (runs/_explainer.html) -------------------------------------------

const promptText = (components) => {
  const entries = Object.entries(components || {});
  return entries.length === 1 ? entries[0][1] : entries.map(([name, text]) => `## ${name}\n${text}`).join("\n\n");
};

// The best prompt's full text is fetched when the best changes (events carry previews only).
async function renderBestPrompt() {
  const index = bestIndex();
  if (index === null || index === S.shownBest) return;
  S.shownBest = index;
  const url = root.dataset.candidateJsonUrl.replace(/\/0\/download\.json$/, `/${index}/download.json`);
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  if (!response.ok || S.shownBest !== index) return;
  const candidate = await response.json();
  $("best-prompt").textContent = promptText(candidate.components);
  $("best-index").textContent = String(index);
  $("best-link").href = candidateUrl(index);
  for (const field of ["best-prompt", "best-link"]) $(field).hidden = false;
  root.querySelector('[data-copy="best-prompt-text"]').hidden = false;
  $("no-best").hidden = true;
}

// One line of what GEPA is doing now, from the latest event.
const STATUS_LINES = {
  queued: "Queued: waiting for a worker to pick the run up.",
  stopping: "Stopping: GEPA finishes the current iteration, then stops.",
  stopped: "Stopped by the user.",
  completed: "Finished: the budget is spent.",
  failed: "Failed: see the error below.",
};

function doing(text) { $("doing-now").textContent = text; }

function doingFromStatus() {
  const r = S.run;
  if (r.status === "running") doing(r.phase === "optimizing" ? "Optimizing: GEPA picks a parent from the front, reflects on its misses and proposes a rewrite." : `Running: ${r.phase || "starting"}.`);
  else doing(STATUS_LINES[r.status] || r.status);
}

function doingFromProposal(p) {
  const n = minibatchSize(p);
  const scores = `${fmt(p.before / n, 2)} → ${fmt(p.after / n, 2)} on a minibatch of ${n}`;
  doing(p.accepted
    ? `Iteration ${p.iteration}: a rewrite of #${p.parent} improved it (${scores}); it became candidate #${p.candidate} and was scored on the val set.`
    : `Iteration ${p.iteration}: a rewrite of #${p.parent} did not beat it (${scores}); discarded, GEPA tries again.`);
}

// ---- charts --------------------------------------------------------------------

const charts = {
  score: document.getElementById("chart-score"),
  lineage: document.getElementById("chart-lineage"),
  front: document.getElementById("chart-front"),
  scatter: document.getElementById("chart-scatter"),
  verdicts: document.getElementById("chart-verdicts"),
};

// Rejected proposals were scored on a minibatch, not on the val set: they get
// their own strip (y2) under the val-score axis, never a place on it.
function bestSoFar() {
  const bx = [], by = [];
  let best = -Infinity;
  for (const i of S.order) {
    const c = S.byIndex.get(i);
    if (c.val_score === null || c.val_score === undefined) continue;
    if (c.val_score > best || !bx.length) { best = Math.max(best, c.val_score); bx.push(c.metric_calls); by.push(best); }
  }
  // The line runs on to the budget spent so far: the best has held since.
  const end = Math.max(S.run.budget_used || 0, bx.length ? bx[bx.length - 1] : 0);
  if (bx.length && end > bx[bx.length - 1]) { bx.push(end); by.push(best); }
  S.best = best;
  return { x: bx, y: by };
}

function redrawBestLine() {
  const line = bestSoFar();
  Plotly.restyle(charts.score, { x: [line.x], y: [line.y] }, [1]);
}

function drawScore(rejected) {
  const xs = [], ys = [], text = [], ids = [];
  for (const i of S.order) {
    const c = S.byIndex.get(i);
    xs.push(c.metric_calls); ys.push(c.val_score); text.push(hover(c)); ids.push(i);
  }
  const line = bestSoFar();
  plot(charts.score, [
    { name: "candidates (val score)", x: xs, y: ys, text, customdata: ids, mode: "markers", type: pointsType(xs.length), hoverinfo: "text", cliponaxis: false, marker: { size: 8, color: COLORS.front } },
    { name: "best so far", x: line.x, y: line.y, mode: "lines", line: { shape: "hv", color: COLORS.best }, hoverinfo: "skip", cliponaxis: false },
    { name: "rejected proposal (minibatch score)", x: rejected.map((p) => p.metric_calls), y: rejected.map(minibatchMean), text: rejected.map(proposalHover),
      yaxis: "y2", mode: "markers", type: pointsType(rejected.length), hoverinfo: "text", cliponaxis: false, marker: { size: 6, color: COLORS.rejected, symbol: "x" } },
    { name: "selected", x: [], y: [], mode: "markers", hoverinfo: "skip", showlegend: false, cliponaxis: false, marker: { size: 14, color: "rgba(0,0,0,0)", line: { color: COLORS.selected, width: 2 } } },
  ], { margin: MARGIN, xaxis: { title: { text: "metric calls" }, rangemode: "tozero", anchor: "y2" },
       yaxis: scoreAxis("val score", { domain: [0.3, 1] }),
       yaxis2: scoreAxis("minibatch", { domain: [0, 0.18], tickvals: [0, 0.5, 1] }),
       legend: { orientation: "h", y: -0.25 } });
  charts.score.on("plotly_click", (e) => { const p = e.points.find((q) => q.curveNumber === 0); if (p) toggleSelected(p.customdata); });
}

// Past this many points a trace is drawn with WebGL: SVG keeps one DOM node per
// point, which made a 10,000-candidate page take seconds to draw.
const GL_POINTS = 1000;
const pointsType = (n) => (n > GL_POINTS ? "scattergl" : "scatter");

// before / after are sums over the minibatch (gepa's); the page shows means.
const minibatchSize = (p) => (p.minibatch_size ?? (p.minibatch && p.minibatch.length)) || 1;
const minibatchMean = (p) => p.after / minibatchSize(p);
const proposalHover = (p) => `rejected from #${p.parent} · minibatch ${fmt(p.before / minibatchSize(p), 2)} → ${fmt(minibatchMean(p), 2)}`;

// Two edge traces: plain parent → child lines, and merges (a child of two
// parents) drawn bolder in their own colour so both joins are visible.
function lineageEdges(c) {
  const x = [], y = [];
  for (const p of c.parents) {
    const parent = S.byIndex.get(p);
    if (!parent) continue;
    x.push(p, c.index, null); y.push(parent.val_score, c.val_score, null);
  }
  return { x, y, merge: c.parents.length > 1 };
}

function lineageStyle() {
  return {
    color: S.order.map((i) => COLORS[role(i)]),
    line: S.order.map((i) => (S.selected.has(i) ? 3 : 0)),
    symbol: S.order.map((i) => (S.byIndex.get(i).parents.length > 1 ? "diamond" : "circle")),
  };
}

// Candidate numbers are integers: one tick per candidate while they fit, then
// whole steps; a lone seed sits in the middle of a sane range, not at ±0.5 noise.
function lineageXAxis() {
  const last = S.order.length ? Math.max(...S.order) : 0;
  return { title: { text: "candidate (birth order)" }, tickmode: "linear", tick0: 0, dtick: Math.max(1, Math.ceil((last + 1) / 12)),
           tickformat: "d", range: [-0.5, Math.max(last, 1) + 0.5], autorange: false };
}

function drawLineage() {
  const plain = { x: [], y: [] }, merges = { x: [], y: [] };
  for (const i of S.order) { const e = lineageEdges(S.byIndex.get(i)); const into = e.merge ? merges : plain; into.x.push(...e.x); into.y.push(...e.y); }
  const style = lineageStyle();
  const edgeTrace = (name, edges, line) => ({
    // The edges carry (unused) copies of the nodes' array attributes so one
    // extendTraces call can grow all three traces.
    name, x: edges.x, y: edges.y, text: edges.x.map(() => ""), customdata: edges.x.map(() => null), mode: "lines", line, hoverinfo: "skip", cliponaxis: false,
    type: pointsType(S.order.length),
    marker: { color: edges.x.map(() => COLORS.other), symbol: edges.x.map(() => "circle"), line: { width: edges.x.map(() => 0) } },
  });
  plot(charts.lineage, [
    edgeTrace("parent → child", plain, { color: COLORS.edge, width: 1 }),
    { name: "candidates", x: [...S.order], y: S.order.map((i) => S.byIndex.get(i).val_score), customdata: [...S.order],
      text: S.order.map((i) => hover(S.byIndex.get(i))), hoverinfo: "text", mode: "markers", cliponaxis: false, type: pointsType(S.order.length),
      marker: { size: 11, color: style.color, symbol: style.symbol, line: { color: COLORS.selected, width: style.line } } },
    edgeTrace("merge: child of both parents", merges, { color: COLORS.merge, width: 2, dash: "dot" }),
  ], { margin: MARGIN, legend: { orientation: "h", y: -0.3 }, xaxis: lineageXAxis(), yaxis: scoreAxis("val score") });
  // A click opens the candidate; shift/ctrl/cmd-click selects it for comparison.
  charts.lineage.on("plotly_click", (e) => {
    const p = e.points.find((q) => q.curveNumber === 1);
    if (!p) return;
    const ev = e.event || {};
    if (ev.shiftKey || ev.ctrlKey || ev.metaKey) toggleSelected(p.customdata);
    else window.location.href = candidateUrl(p.customdata);
  });
}

function relayoutLineage() {
  const axis = lineageXAxis();
  Plotly.relayout(charts.lineage, Object.fromEntries(Object.entries(axis).filter(([k]) => k !== "title").map(([k, v]) => [`xaxis.${k}`, v])));
}

function restyleLineage() {
  const style = lineageStyle();
  Plotly.restyle(charts.lineage, { "marker.color": [style.color], "marker.line.width": [style.line], "marker.symbol": [style.symbol] }, [1]);
}

const rowLabel = (i) => `#${i}`;
const taskLabels = () => S.tasks.map(esc);

function leaderCells() {
  const x = [], y = [];
  for (const [key, group] of Object.entries(S.leaders)) {
    if (!S.taskColumn.has(key)) continue;
    for (const i of group) if (S.byIndex.get(i)?.scores) { x.push(esc(key)); y.push(rowLabel(i)); } // rows of the heatmap only
  }
  return { x, y };
}

function frontTicks() {
  return {
    "yaxis.tickvals": S.rows.map(rowLabel),
    "yaxis.ticktext": S.rows.map((i) => `${S.members.has(i) ? "★ " : ""}#${i} · leads ${leadCount(i)}`),
  };
}

function drawFront() {
  const z = S.rows.map((i) => S.byIndex.get(i).scores);
  const cells = leaderCells();
  renderRowsNote();
  return plot(charts.front, [
    { type: "heatmap", x: taskLabels(), y: S.rows.map(rowLabel), z, zmin: 0, zmax: 1, colorscale: "Viridis", showlegend: false,
      // One template, not a string per cell (a 1,000-task run had 50,000 of them); the labels are escaped.
      hovertemplate: "%{y} on %{x}: %{z:.3f}<extra></extra>", colorbar: { title: { text: "score" }, thickness: 10 } },
    { name: "○ top score on this task (leads it)", x: cells.x, y: cells.y, mode: "markers", type: "scatter", hoverinfo: "skip", showlegend: true,
      marker: { symbol: "circle-open", size: 6, color: "#fff", line: { width: 1.5 } } },
  ], { margin: { l: 130, r: 10, t: 10, b: 80 }, showlegend: true, legend: { orientation: "h", x: 0, y: 1.02, yanchor: "bottom", bgcolor: "#495057", font: { color: "#fff" } },
       xaxis: { type: "category", tickangle: -45, automargin: true },
       yaxis: { type: "category", autorange: "reversed", ...Object.fromEntries(Object.entries(frontTicks()).map(([k, v]) => [k.split(".")[1], v])) } },
  { react: true });
}

// A big run's heatmap starts with the front and the top candidates; the rest come a page at a time.
function renderRowsNote() {
  const note = $("heatmap-rows");
  if (!note) return;
  note.hidden = S.rows.length >= S.order.length;
  $("heatmap-count").textContent = `${S.rows.length} of ${S.order.length} candidates shown (the front, the seed, the best and the top scores first).`;
}

async function loadMoreRows() {
  const button = root.querySelector('[data-action="more-rows"]');
  button.disabled = true;
  try {
    const url = `${root.dataset.scoresUrl}?after=${S.rowsCursor}`;
    const response = await fetch(url, { headers: { Accept: "application/json" } });
    if (!response.ok) return;
    const page = await response.json();
    const column = page.tasks.map((key) => S.taskColumn.get(key));
    page.rows.forEach((index, k) => {
      const c = S.byIndex.get(index);
      S.rowsCursor = Math.max(S.rowsCursor, index);
      if (!c || c.scores) return;
      c.scores = S.tasks.map(() => null);
      column.forEach((at, j) => { if (at !== undefined) c.scores[at] = page.scores[k][j]; });
      c.preview = page.previews[k];
      S.rows.push(index);
    });
    S.rows.sort((a, b) => a - b);
    if (!page.more) S.rowsCursor = Infinity;
    await drawFront();
    refreshRows();
  } finally {
    button.disabled = S.rowsCursor === Infinity;
  }
}

function restyleFront() {
  const cells = leaderCells();
  Plotly.restyle(charts.front, { x: [cells.x], y: [cells.y] }, [1]);
  Plotly.relayout(charts.front, frontTicks());
}

// 2-D front on user-picked axes. Scores are maximised; sizes and latency minimised.
function axisOptions() {
  return [
    { key: "val_score", label: "aggregate score", up: true, get: (c) => c.val_score },
    ...S.verifiers.map((v) => ({ key: `obj:${v}`, label: `${v} score`, up: true, get: (c) => c.objective_scores[v] ?? null })),
    { key: "prompt_tokens", label: "prompt length (tokens)", up: false, get: (c) => c.prompt_tokens },
    { key: "mean_output_tokens", label: "mean output tokens", up: false, get: (c) => c.mean_output_tokens },
    { key: "mean_latency_ms", label: "mean latency (ms)", up: false, get: (c) => c.mean_latency_ms },
  ];
}

function setupAxisPickers() {
  const options = axisOptions();
  for (const [id, initial] of [["axis-x", "prompt_tokens"], ["axis-y", "val_score"]]) {
    const select = document.getElementById(id);
    select.replaceChildren(...options.map((o) => { const el = document.createElement("option"); el.value = o.key; el.textContent = o.label; return el; }));
    select.value = initial;
    select.addEventListener("change", drawScatter);
  }
}

export function nonDominated(points, xUp, yUp) {
  // points: [{x, y, id}] → ids of points no other point beats on both axes.
  const better = (a, b, up) => (up ? a >= b : a <= b);
  const strictly = (a, b, up) => (up ? a > b : a < b);
  return points.filter((p) => !points.some((q) => q !== p && better(q.x, p.x, xUp) && better(q.y, p.y, yUp) && (strictly(q.x, p.x, xUp) || strictly(q.y, p.y, yUp))));
}

const axisFor = (option) => (option.key === "val_score" || option.key.startsWith("obj:") ? scoreAxis(esc(option.label)) : { title: { text: esc(option.label) } });

function drawScatter() {
  const options = axisOptions();
  const ax = options.find((o) => o.key === document.getElementById("axis-x").value) || options[0];
  const ay = options.find((o) => o.key === document.getElementById("axis-y").value) || options[0];
  const points = S.order.map((i) => ({ id: i, x: ax.get(S.byIndex.get(i)), y: ay.get(S.byIndex.get(i)) })).filter((p) => p.x !== null && p.y !== null && p.x !== undefined && p.y !== undefined);
  const front = nonDominated(points, ax.up, ay.up).sort((a, b) => a.x - b.x);
  plot(charts.scatter, [
    { name: "candidates", x: points.map((p) => p.x), y: points.map((p) => p.y), customdata: points.map((p) => p.id),
      text: points.map((p) => hover(S.byIndex.get(p.id))), hoverinfo: "text", mode: "markers", type: pointsType(points.length),
      marker: { size: 8, color: points.map((p) => (S.selected.has(p.id) ? COLORS.selected : COLORS.other)) } },
    { name: "non-dominated", x: front.map((p) => p.x), y: front.map((p) => p.y), customdata: front.map((p) => p.id),
      text: front.map((p) => hover(S.byIndex.get(p.id))), hoverinfo: "text", mode: "lines+markers",
      line: { color: COLORS.front, shape: "linear" }, marker: { size: 10, color: COLORS.front } },
  ], { margin: MARGIN, legend: { orientation: "h", y: -0.3 }, xaxis: axisFor(ax), yaxis: axisFor(ay) }, { react: true });
}

function verdictCounts(index) {
  const counts = { p: 0, b: 0, f: 0 };
  const c = S.byIndex.get(index);
  if (c?.verdict_counts) return c.verdict_counts; // the snapshot's, as recorded: [pass, borderline, fail]
  if (c) for (const letter of c.verdicts) if (letter in counts) counts[letter] += 1;
  return ["p", "b", "f"].map((k) => counts[k]);
}

function drawVerdicts() {
  const best = bestIndex();
  const x = Object.values(VERDICT_NAMES);
  plot(charts.verdicts, [
    { name: "seed (#0)", type: "bar", x, y: verdictCounts(0), marker: { color: COLORS.other } },
    { name: best === null ? "best" : `best (#${best})`, type: "bar", x, y: verdictCounts(best), marker: { color: COLORS.best } },
  ], { margin: MARGIN, barmode: "group", yaxis: { title: { text: "val tasks" }, tickformat: "d", rangemode: "tozero" }, legend: { orientation: "h", y: -0.2 } }, { react: true });
}

// ---- candidate table -------------------------------------------------------------

function candidateRow(c) {
  const tr = document.createElement("tr");
  tr.dataset.candidateIndex = c.index;
  const cells = [document.createElement("td")];
  const box = document.createElement("input");
  box.type = "checkbox"; box.setAttribute("aria-label", `select candidate ${c.index}`);
  box.addEventListener("change", () => toggleSelected(c.index, box.checked));
  cells[0].append(box);
  const link = document.createElement("a");
  link.href = candidateUrl(c.index); link.textContent = `#${c.index}`;
  const td = (text, cls) => { const el = document.createElement("td"); el.textContent = text; if (cls) el.className = cls; return el; };
  const idCell = td("", "num"); idCell.append(link);
  cells.push(idCell, td(c.origin), td(c.parents.map((p) => `#${p}`).join(" + ") || "–"), td(fmt(c.val_score), "num"),
    td(leadText(c.index), "num lead-count"), td(String(c.metric_calls), "num"),
    td(money(c.cost, S.run.pricing), "num cost"), td("", "front-mark"));
  tr.append(...cells);
  return tr;
}

const leadText = (index) => { const n = leadCount(index); return n === null ? "–" : String(n); };

function refreshRows() {
  for (const tr of document.querySelectorAll("#candidate-rows tr")) {
    const i = Number(tr.dataset.candidateIndex);
    tr.querySelector(".lead-count").textContent = leadText(i);
    tr.querySelector(".front-mark").textContent = role(i) === "best" ? "best" : S.members.has(i) ? "★ front" : "";
    tr.classList.toggle("selected", S.selected.has(i));
    tr.querySelector("input").checked = S.selected.has(i);
  }
}

// ---- selection -------------------------------------------------------------------

function toggleSelected(index, on = !S.selected.has(index)) {
  if (on) S.selected.add(index); else S.selected.delete(index);
  renderSelection();
}

// At boot the charts were just drawn with nothing selected: only the bar and the link need filling.
function renderSelection({ charts: redraw = true } = {}) {
  const chosen = [...S.selected].sort((a, b) => a - b);
  $("selection").textContent = chosen.length ? `Selected: ${chosen.map((i) => `#${i}`).join(", ")}` : "No candidates selected";
  const link = root.querySelector('[data-action="compare"]');
  const query = new URLSearchParams(chosen.map((i) => ["c", String(i)]));
  link.href = `${root.dataset.compareUrl}?${query}`;
  link.setAttribute("aria-disabled", chosen.length < 2 ? "true" : "false");
  if (!redraw) return;
  const sel = chosen.filter((i) => S.byIndex.has(i)).map((i) => S.byIndex.get(i));
  Plotly.restyle(charts.score, { x: [sel.map((c) => c.metric_calls)], y: [sel.map((c) => c.val_score)] }, [3]);
  restyleLineage();
  drawScatter();
  refreshRows();
}

// ---- streams ---------------------------------------------------------------------

// Each stream keeps as many items as the snapshot's tail, so a reload shows what the live page showed.
function pushStream(id, li) {
  const list = document.getElementById(`stream-${id}`);
  list.prepend(li);
  while (list.children.length > S.limits[id]) list.lastElementChild.remove();
}

function el(tag, text, cls) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (cls) node.className = cls;
  return node;
}

function renderProposal(p) {
  const li = el("li", undefined, p.accepted ? "accepted" : "rejected");
  const n = minibatchSize(p);
  li.append(el("strong", p.accepted ? `accepted → #${p.candidate}` : "rejected"),
    el("span", ` it. ${p.iteration} · from #${p.parent} · minibatch ${fmt(p.before / n, 2)} → ${fmt(p.after / n, 2)} · ${(p.components || []).join(", ")}`, "muted"),
    el("span", p.usage ? ` · ${money(p.cost, S.run.pricing)} · ${tokens(p.usage.total?.tokens_in + p.usage.total?.tokens_out)} tokens (reflection ${tokens(p.usage.reflection?.tokens_in + p.usage.reflection?.tokens_out)})` : "", "muted proposal-cost"));
  const details = el("details");
  details.append(el("summary", "proposed text"));
  for (const [name, text] of Object.entries(p.texts || {})) { details.append(el("div", name, "muted"), el("pre", clip(text, S.limits.text))); }
  if (p.reasoning) details.append(el("div", "reasoning", "muted"), el("pre", clip(p.reasoning, S.limits.text)));
  li.append(details);
  pushStream("proposals", li);
}

function renderTrial(item, candidate, split) {
  const li = el("li");
  li.append(el("strong", item.task_key), el("span", ` ${candidate === null || candidate === undefined ? "proposal" : `#${candidate}`} · ${split} · `, "muted"),
    el("span", `${fmt(item.score)} ${item.verdict}`, `verdict-${item.verdict}`));
  li.append(el("pre", clip(item.output || "", S.limits.text)));
  const reasons = (item.reasons || []).slice(0, S.limits.reasons);
  if (reasons.length) { const ul = el("ul", undefined, "reasons"); for (const r of reasons) ul.append(el("li", r)); li.append(ul); }
  pushStream("trials", li);
}

function renderError(e) {
  const li = el("li", undefined, "error");
  li.append(el("strong", e.where), el("span", ` ${e.iteration === null || e.iteration === undefined ? "" : `it. ${e.iteration} · `}`, "muted"), el("span", e.message));
  pushStream("errors", li);
}

// ---- events ----------------------------------------------------------------------

const handlers = {
  "run.status": (d) => {
    Object.assign(S.run, { status: d.status, phase: d.phase ?? S.run.phase, active: ["queued", "running", "stopping"].includes(d.status) });
    if (d.error) S.run.error = d.error;
    if (S.run.active) { S.run.finished_at = null; S.finishedAt = null; S.run.error = d.error || ""; S.run.stop_reason = ""; } // resumed: run_resume clears the error and the stop reason
    if (!S.run.started_at && d.status === "running") S.run.started_at = new Date().toISOString();
    renderHeader();
    doingFromStatus();
  },
  "run.budget": (d) => {
    Object.assign(S.run, { budget_used: d.used, budget_total: d.total });
    if (d.cost !== undefined) Object.assign(S.run, { cost: d.cost, tokens: d.tokens, usage: d.usage ?? S.run.usage, eta_seconds: d.eta_seconds });
    renderHeader();
    later(redrawBestLine);
  },
  "candidate.new": (d) => {
    if (S.byIndex.has(d.index)) return; // a resumed run re-announces the seed
    const c = candidateFromEvent(d);
    addCandidate(c);
    if (S.run.seed_score === null && c.index === 0) S.run.seed_score = c.val_score;
    if (S.run.active) doing(`Candidate #${c.index} scored ${fmt(c.val_score)} on the val set${c.index === 0 ? " (the seed)" : ""}.`);
    Plotly.extendTraces(charts.score, { x: [[c.metric_calls]], y: [[c.val_score]], text: [[hover(c)]], customdata: [[c.index]] }, [0]);
    later(redrawBestLine);
    const e = lineageEdges(c);
    const blank = (value) => e.x.map(() => value);
    Plotly.extendTraces(charts.lineage, {
      x: [e.x, [c.index]], y: [e.y, [c.val_score]], text: [blank(""), [hover(c)]], customdata: [blank(null), [c.index]],
      "marker.color": [blank(COLORS.other), [COLORS[role(c.index)]]],
      "marker.symbol": [blank("circle"), [c.parents.length > 1 ? "diamond" : "circle"]],
      "marker.line.width": [blank(0), [0]],
    }, [e.merge ? 2 : 0, 1]);
    later(recomputeFront);
    later(relayoutLineage);
    // The new row's tick label arrives with the front.updated that follows every candidate.new.
    Plotly.extendTraces(charts.front, { z: [[c.scores]], y: [[rowLabel(c.index)]] }, [0]);
    document.getElementById("candidate-rows").append(candidateRow(c));
    refreshRows();
    later(drawScatter);
    later(drawVerdicts);
    renderHeader();
  },
  "front.updated": (d) => {
    S.leaders = d.leaders || {};
    later(recomputeFront);
    if (d.best_index !== undefined && d.best_index !== null) S.run.best_index = d.best_index;
    if (d.best_score !== undefined) S.run.best_score = d.best_score;
    renderBestPrompt();
    later(restyleFront); later(restyleLineage); later(drawVerdicts); refreshRows(); renderHeader();
  },
  proposal: (d) => {
    renderProposal(d);
    if (S.run.active) doingFromProposal(d);
    if (!d.accepted) Plotly.extendTraces(charts.score, { x: [[d.metric_calls]], y: [[minibatchMean(d)]], text: [[proposalHover(d)]] }, [2]);
  },
  trials: (d) => { for (const item of d.items || []) renderTrial(item, d.candidate, d.split); },
  error: (d) => renderError(d),
  "run.finished": (d) => {
    Object.assign(S.run, { status: d.status, active: false, best_index: d.best_index, best_score: d.best_score, seed_score: d.seed_score ?? S.run.seed_score });
    if (d.cost !== undefined) Object.assign(S.run, { cost: d.cost, stop_reason: d.stop_reason, eta_seconds: null });
    S.finishedAt = Date.now();
    renderHeader();
    doingFromStatus();
    renderBestPrompt(); later(restyleLineage); later(drawVerdicts); refreshRows();
  },
};

// Members by the shared rule (front.js), as the server's recorder computes them:
// once per frame, however many candidates a replay brings.
function recomputeFront() {
  // Over the rows the page holds: they include every front member, so the front is exact (dashboard/selectors.py).
  S.members = new Set(frontMembers(S.rows.map((i) => [i, S.byIndex.get(i).scores])));
  for (const [i, c] of S.byIndex) c.on_front = S.members.has(i);
  refreshRows();
}

function applyEvent(event) {
  const handler = handlers[event.type];
  const started = performance.now();
  if (handler) handler(event.data || {}, event.seq);
  if (S.run.kind === "external" && S.run.active) S.run.client_seen_at = new Date().toISOString(); // every batch is a sign of life
  const stats = window.__frontierRun;
  stats.lastSeq = event.seq;
  stats.applied += 1;
  stats.slowestApplyMs[event.type] = Math.max(stats.slowestApplyMs[event.type] || 0, performance.now() - started);
}

// ---- boot ------------------------------------------------------------------------

// The snapshot sends big lists as columns ({field: [value per item]}): one object per item here.
function unzip(columns) {
  const fields = Object.keys(columns);
  const n = fields.length ? columns[fields[0]].length : 0;
  const out = new Array(n);
  for (let k = 0; k < n; k++) { const item = {}; for (const f of fields) item[f] = columns[f][k]; out[k] = item; }
  return out;
}

async function boot() {
  const response = await fetch(root.dataset.snapshotUrl, { headers: { Accept: "application/json" } });
  if (!response.ok) { $("live").textContent = `could not load the run (${response.status})`; return; }
  const snap = await response.json();
  S.run = snap.run;
  S.tasks = snap.tasks;
  S.tasks.forEach((key, k) => S.taskColumn.set(key, k));
  S.verifiers = snap.verifiers;
  S.limits = snap.limits;
  const rowOf = new Map(snap.rows.map((index, k) => [index, k]));
  unzip(snap.candidates).forEach((c) => addCandidate({ ...c, scores: rowOf.has(c.index) ? snap.scores[rowOf.get(c.index)] : null }));
  S.rowsCursor = -1;
  S.members = new Set(snap.front.members);
  S.leaders = snap.front.leaders;
  // Read by browser tests and handy in the console.
  window.__frontierRun = { lastSeq: S.run.last_seq, applied: 0, slowestApplyMs: {}, candidates: () => S.order.length };

  drawScore(unzip(snap.rejected));
  drawLineage();
  drawFront();
  charts.front.on("plotly_click", (e) => {
    const p = e.points[0];
    if (p && p.curveNumber === 0) toggleSelected(S.rows[p.pointNumber[0]]);
  });
  root.querySelector('[data-action="more-rows"]')?.addEventListener("click", loadMoreRows);
  setupAxisPickers();
  drawScatter();
  // Points of the 2-D front select like the other charts' (Plotly.react keeps this listener).
  charts.scatter.on("plotly_click", (e) => { const p = e.points[0]; if (p && p.customdata != null) toggleSelected(p.customdata); });
  drawVerdicts();
  document.getElementById("candidate-rows").append(...S.order.map((i) => candidateRow(S.byIndex.get(i))));
  snap.proposals.forEach(renderProposal);
  snap.trials.forEach((t) => renderTrial(t, t.candidate, t.split));
  snap.errors.forEach(renderError);
  refreshRows();
  renderHeader();
  renderSelection({ charts: false });
  S.shownBest = $("best-prompt").hidden ? null : Number($("best-index").textContent);
  renderBestPrompt();
  const lastProposal = snap.proposals[snap.proposals.length - 1];
  if (S.run.active && S.run.status === "running" && lastProposal) doingFromProposal(lastProposal); else doingFromStatus();
  wireCopyButtons(root);
  root.querySelector('[data-action="clear-selection"]').addEventListener("click", () => { S.selected.clear(); renderSelection(); });
  root.querySelector('[data-action="compare"]').addEventListener("click", (e) => { if (S.selected.size < 2) e.preventDefault(); });
  setInterval(renderClock, 1000);
  if (S.run.kind === "external") setInterval(pollClient, 5000);

  const live = $("live");
  const socket = new LiveSocket({
    path: root.dataset.wsPath,
    after: S.run.last_seq,
    onEvent: applyEvent,
    onState: (state) => { live.dataset.state = state; live.textContent = { live: "● live", reconnecting: "reconnecting…", denied: "access denied: reload to log in" }[state] || state; },
  });
  socket.connect();
}

boot();
