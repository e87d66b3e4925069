// @ts-check
// The run page's five charts: drawn whole from the state once, then grown in
// place (Plotly.extendTraces / restyle on the trace that changed; react only
// for the small scatter and verdict figures). Clicks that select a candidate
// call the `toggle` the page passes in (run/table.js toggleSelected).
import { COLORS, plot, scoreAxis } from "../charts.js";
import { nonDominated } from "../front.js";
import { esc } from "../format.js";
import { bestIndex, bestSoFar, leadCounts, lineageEdges, lineageSummary, role, verdictCounts } from "./state.js";
import { VERDICT_NAMES, hover, leadText, lineageNote, minibatchMean, proposalHover, rowsNote } from "./text.js";
import { $, S, candidateUrl } from "./page.js";

/**
 * @typedef {import("./state.js").Candidate} Candidate
 * @typedef {import("./state.js").ProposalScores} ProposalScores
 * @typedef {(index: number) => void} Toggle selects or unselects a candidate (run/table.js toggleSelected)
 */

// The top margin holds Plotly's toolbar, which appears on hover: with less, it
// covered the points at score 1.000 (the top edge of the [0, 1] axes).
const MARGIN = { l: 50, r: 10, t: 34, b: 40 };

// Past this many points a trace is drawn with WebGL: SVG keeps one DOM node per
// point, which made a 10,000-candidate page take seconds to draw.
const GL_POINTS = 1000;
const pointsType = (/** @type {number} */ n) => (n > GL_POINTS ? "scattergl" : "scatter");

// Past this many candidates the charts below the fold (the heatmap, the picked-axes
// front, the verdicts) are drawn once the page is live or when they come near the
// view, whichever is first: the page is live sooner, nothing is left undrawn.
export const DEFER_AFTER = 1000;
// The charts drawn so far: live events grow only those; a deferred one draws the state whole.
const drawn = new Set();
export const isDrawn = (/** @type {string} */ name) => drawn.has(name);

const charts = /** @type {Record<"score" | "lineage" | "front" | "scatter" | "verdicts", PlotlyHTMLElement>} */ ({
  score: document.getElementById("chart-score"),
  lineage: document.getElementById("chart-lineage"),
  front: document.getElementById("chart-front"),
  scatter: document.getElementById("chart-scatter"),
  verdicts: document.getElementById("chart-verdicts"),
});

// ---- score vs metric calls -----------------------------------------------------------

// Rejected proposals were scored on a minibatch, not on the val set: they get
// their own strip (y2) under the val-score axis, never a place on it.
// The strip's axis lines (the x axis sits under it) wait for its first point:
// Plotly 4 draws the axis lines of a subplot with no data at NaN (the console's
// `<path> attribute d: Expected number, "M49,NaNH621"`).
let stripLines = false;
/** @param {ProposalScores[]} rejected @param {Toggle} toggle */
export function drawScore(rejected, toggle) {
  stripLines = rejected.length > 0;
  const xs = [], ys = [], text = [], ids = [];
  for (const i of S.order) {
    const c = S.byIndex.get(i);
    xs.push(c.metric_calls); ys.push(c.val_score); text.push(hover(c)); ids.push(i);
  }
  const line = bestSoFar(S);
  plot(charts.score, [
    { name: "candidates (val score)", x: xs, y: ys, text, customdata: ids, mode: "markers", type: pointsType(xs.length), hoverinfo: "text", cliponaxis: false, marker: { size: 8, color: COLORS.front } },
    { name: "best so far", x: line.x, y: line.y, mode: "lines", line: { shape: "hv", color: COLORS.best }, hoverinfo: "skip", cliponaxis: false },
    { name: "rejected proposal (minibatch score)", x: rejected.map((p) => p.metric_calls), y: rejected.map(minibatchMean), text: rejected.map(proposalHover),
      yaxis: "y2", mode: "markers", type: pointsType(rejected.length), hoverinfo: "text", cliponaxis: false, marker: { size: 6, color: COLORS.rejected, symbol: "x" } },
    { name: "selected", x: [], y: [], mode: "markers", hoverinfo: "skip", showlegend: false, cliponaxis: false, marker: { size: 14, color: "rgba(0,0,0,0)", line: { color: COLORS.selected, width: 2 } } },
  ], { margin: MARGIN, xaxis: { title: { text: "metric calls" }, rangemode: "tozero", anchor: "y2", showline: stripLines },
       yaxis: scoreAxis("val score", { domain: [0.3, 1] }),
       yaxis2: scoreAxis("minibatch", { domain: [0, 0.18], tickvals: [0, 0.5, 1], showline: stripLines }),
       legend: { orientation: "h", y: -0.25 } });
  charts.score.on("plotly_click", (e) => { const p = e.points.find((q) => q.curveNumber === 0); if (p) toggle(p.customdata); });
}

export function redrawBestLine() {
  const line = bestSoFar(S);
  Plotly.restyle(charts.score, { x: [line.x], y: [line.y] }, [1]);
}

/** @param {Candidate} c */
export function extendScore(c) {
  Plotly.extendTraces(charts.score, { x: [[c.metric_calls]], y: [[c.val_score]], text: [[hover(c)]], customdata: [[c.index]] }, [0]);
}

/** @param {ProposalScores} p */
export function extendRejected(p) {
  Plotly.extendTraces(charts.score, { x: [[p.metric_calls]], y: [[minibatchMean(p)]], text: [[proposalHover(p)]] }, [2]);
  if (!stripLines) {
    stripLines = true;
    Plotly.relayout(charts.score, { "xaxis.showline": true, "yaxis2.showline": true });
  }
}

// The selected candidates' rings.
/** @param {Candidate[]} selected */
export function restyleSelected(selected) {
  Plotly.restyle(charts.score, { x: [selected.map((c) => c.metric_calls)], y: [selected.map((c) => c.val_score)] }, [3]);
}

// ---- lineage -------------------------------------------------------------------------

// The lineage of a run of more than DEFER_AFTER candidates starts summarised
// (state.js lineageSummary: the front, the best, the top LINEAGE_TOP and their
// ancestors); "Show all" draws every candidate. Live candidates always join it.
export const LINEAGE_TOP = 100;
/** @type {number[]} */
let lineageNodes = []; // the candidates the lineage draws, in the order of its node trace

// Two edge traces: plain parent → child lines, and merges (a child of two
// parents) drawn bolder in their own colour so both joins are visible.
function lineageStyle() {
  const best = bestIndex(S);
  return {
    color: lineageNodes.map((i) => COLORS[role(S, i, best)]),
    line: lineageNodes.map((i) => (S.selected.has(i) ? 3 : 0)),
    symbol: lineageNodes.map((i) => (S.byIndex.get(i).parents.length > 1 ? "diamond" : "circle")),
  };
}

function renderLineageNote() {
  const note = $("lineage-rows");
  if (!note) return;
  note.hidden = lineageNodes.length >= S.order.length;
  $("lineage-count").textContent = lineageNote(lineageNodes.length, S.order.length, LINEAGE_TOP);
}

// Candidate numbers are integers: one tick per candidate while they fit, then
// whole steps; a lone seed sits in the middle of a sane range, not at ±0.5 noise.
function lineageXAxis() {
  const last = S.order.length ? Math.max(...S.order) : 0;
  return { title: { text: "candidate (birth order)" }, tickmode: "linear", tick0: 0, dtick: Math.max(1, Math.ceil((last + 1) / 12)),
           tickformat: "d", range: [-0.5, Math.max(last, 1) + 0.5], autorange: false };
}

// `all`: every candidate, whatever the run's size.
export function drawLineage({ all = false } = {}) {
  lineageNodes = all || S.order.length <= DEFER_AFTER ? [...S.order] : lineageSummary(S, LINEAGE_TOP);
  renderLineageNote();
  /** @type {{x: Array<number | null>, y: Array<number | null>}} */
  const plain = { x: [], y: [] }, merges = { x: [], y: [] };
  for (const i of lineageNodes) { const e = lineageEdges(S, S.byIndex.get(i)); const into = e.merge ? merges : plain; into.x.push(...e.x); into.y.push(...e.y); }
  const style = lineageStyle();
  /** @param {string} name @param {typeof plain} edges @param {PlotlyObject} line */
  const edgeTrace = (name, edges, line) => ({
    // The edges carry (unused) copies of the nodes' array attributes so one
    // extendTraces call can grow all three traces.
    name, x: edges.x, y: edges.y, text: edges.x.map(() => ""), customdata: edges.x.map(() => null), mode: "lines", line, hoverinfo: "skip", cliponaxis: false,
    type: pointsType(lineageNodes.length),
    marker: { color: edges.x.map(() => COLORS.other), symbol: edges.x.map(() => "circle"), line: { width: edges.x.map(() => 0) } },
  });
  plot(charts.lineage, [
    edgeTrace("parent → child", plain, { color: COLORS.edge, width: 1 }),
    { name: "candidates", x: [...lineageNodes], y: lineageNodes.map((i) => S.byIndex.get(i).val_score), customdata: [...lineageNodes],
      text: lineageNodes.map((i) => hover(S.byIndex.get(i))), hoverinfo: "text", mode: "markers", cliponaxis: false, type: pointsType(lineageNodes.length),
      marker: { size: 11, color: style.color, symbol: style.symbol, line: { color: COLORS.selected, width: style.line } } },
    edgeTrace("merge: child of both parents", merges, { color: COLORS.merge, width: 2, dash: "dot" }),
  ], { margin: MARGIN, legend: { orientation: "h", y: -0.3 }, xaxis: lineageXAxis(), yaxis: scoreAxis("val score") },
  { react: drawn.has("lineage") }); // drawn again ("Show all"): react keeps the click listener
  drawn.add("lineage");
}

// Once, at boot (a plotly_click listener survives Plotly.newPlot on the same element).
// A click opens the candidate; shift/ctrl/cmd-click selects it for comparison.
/** @param {Toggle} toggle */
export function selectFromLineage(toggle) {
  charts.lineage.on("plotly_click", (e) => {
    const p = e.points.find((q) => q.curveNumber === 1);
    if (!p) return;
    /** @type {Partial<MouseEvent>} */
    const ev = e.event || {};
    if (ev.shiftKey || ev.ctrlKey || ev.metaKey) toggle(p.customdata);
    else window.location.href = candidateUrl(p.customdata);
  });
}

/** @param {Candidate} c */
export function extendLineage(c) {
  lineageNodes.push(c.index);
  renderLineageNote();
  const e = lineageEdges(S, c);
  const blank = (/** @type {unknown} */ value) => e.x.map(() => value);
  Plotly.extendTraces(charts.lineage, {
    x: [e.x, [c.index]], y: [e.y, [c.val_score]], text: [blank(""), [hover(c)]], customdata: [blank(null), [c.index]],
    "marker.color": [blank(COLORS.other), [COLORS[role(S, c.index)]]],
    "marker.symbol": [blank("circle"), [c.parents.length > 1 ? "diamond" : "circle"]],
    "marker.line.width": [blank(0), [0]],
  }, [e.merge ? 2 : 0, 1]);
}

export function relayoutLineage() {
  const axis = lineageXAxis();
  Plotly.relayout(charts.lineage, Object.fromEntries(Object.entries(axis).filter(([k]) => k !== "title").map(([k, v]) => [`xaxis.${k}`, v])));
}

export function restyleLineage() {
  const style = lineageStyle();
  Plotly.restyle(charts.lineage, { "marker.color": [style.color], "marker.line.width": [style.line], "marker.symbol": [style.symbol] }, [1]);
}

// ---- Pareto front: candidates × tasks ---------------------------------------------------

const rowLabel = (/** @type {number} */ i) => `#${i}`;
const taskLabels = () => S.tasks.map(esc);

function leaderCells() {
  /** @type {string[]} */
  const x = [], y = [];
  for (const [key, group] of Object.entries(S.leaders)) {
    if (!S.taskColumn.has(key)) continue;
    for (const i of group) if (S.byIndex.get(i)?.scores) { x.push(esc(key)); y.push(rowLabel(i)); }
  }
  return { x, y };
}

function frontTicks() {
  const leads = leadCounts(S);
  return {
    "yaxis.tickvals": S.rows.map(rowLabel),
    "yaxis.ticktext": S.rows.map((i) => `${S.members.has(i) ? "★ " : ""}#${i} · leads ${leadText(S, i, leads)}`),
  };
}

// The heatmap's rows are S.rows (every candidate of a small run; a big run's
// front and top ones, then more on demand). Drawn again with react when rows arrive.
export function drawFront() {
  const z = S.rows.map((i) => S.byIndex.get(i).scores);
  const cells = leaderCells();
  renderRowsNote();
  drawn.add("front");
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

// Once, at boot (react keeps the listener when the heatmap is drawn again).
/** @param {Toggle} toggle */
export function selectFromFront(toggle) {
  charts.front.on("plotly_click", (e) => {
    const p = e.points[0];
    // A heatmap cell: [row, column].
    if (p && p.curveNumber === 0) toggle(S.rows[/** @type {number[]} */ (p.pointNumber)[0]]);
  });
}

// A big run's heatmap starts with the front and the top candidates; the rest come a page at a time.
export function renderRowsNote() {
  const note = $("heatmap-rows");
  if (!note) return;
  note.hidden = S.rows.length >= S.order.length;
  $("heatmap-count").textContent = rowsNote(S);
}

// The new row's tick label arrives with the front.updated that follows every candidate.new.
/** @param {Candidate} c */
export function extendFront(c) {
  if (!drawn.has("front")) return;
  Plotly.extendTraces(charts.front, { z: [[c.scores]], y: [[rowLabel(c.index)]] }, [0]);
}

export function restyleFront() {
  if (!drawn.has("front")) return;
  const cells = leaderCells();
  Plotly.restyle(charts.front, { x: [cells.x], y: [cells.y] }, [1]);
  Plotly.relayout(charts.front, frontTicks());
}

// ---- Pareto front on picked axes ----------------------------------------------------------

/**
 * An axis the scatter can pick: `up` when more is better.
 * @typedef {{key: string, label: string, up: boolean, get: (c: Candidate) => number | null}} AxisOption
 */

// Scores are maximised; sizes and latency minimised.
/** @returns {AxisOption[]} */
function axisOptions() {
  return [
    { key: "val_score", label: "aggregate score", up: true, get: (c) => c.val_score },
    ...S.verifiers.map((v) => ({ key: `obj:${v}`, label: `${v} score`, up: true, get: (/** @type {Candidate} */ c) => c.objective_scores[v] ?? null })),
    { key: "prompt_tokens", label: "prompt length (tokens)", up: false, get: (c) => c.prompt_tokens },
    { key: "mean_output_tokens", label: "mean output tokens", up: false, get: (c) => c.mean_output_tokens },
    { key: "mean_latency_ms", label: "mean latency (ms)", up: false, get: (c) => c.mean_latency_ms },
    { key: "metric_calls", label: "metric calls when found", up: false, get: (c) => c.metric_calls },
  ];
}

// Until the user picks an x axis, it is the first measure the run has data for:
// an external run's adapter reports no prompt length or latency (all 0), so
// its front would be a column of points on x = 0.
let xPicked = false;

/** @param {AxisOption} option */
const hasData = (option) => S.order.some((i) => { const v = option.get(S.byIndex.get(i)); return v !== null && v !== undefined && v !== 0; });

/** @param {AxisOption[]} options */
const defaultX = (options) => (options.find((o) => o.key !== "val_score" && o.key !== "metric_calls" && hasData(o)) || options.find((o) => o.key === "metric_calls") || options[0]).key;

export function setupAxisPickers() {
  const options = axisOptions();
  for (const [id, initial] of [["axis-x", defaultX(options)], ["axis-y", "val_score"]]) {
    const select = /** @type {HTMLSelectElement} */ (document.getElementById(id));
    select.replaceChildren(...options.map((o) => { const el = document.createElement("option"); el.value = o.key; el.textContent = o.label; return el; }));
    select.value = initial;
    select.addEventListener("change", () => { if (id === "axis-x") xPicked = true; drawScatter(); });
  }
}

const axisFor = (/** @type {AxisOption} */ option) => (option.key === "val_score" || option.key.startsWith("obj:") ? scoreAxis(esc(option.label)) : { title: { text: esc(option.label) } });

// `first`: the first draw (at boot, or a deferred one); later calls redraw a drawn chart only.
export function drawScatter({ first = false } = {}) {
  if (!first && !drawn.has("scatter")) return;
  drawn.add("scatter");
  const options = axisOptions();
  const xSelect = /** @type {HTMLSelectElement} */ (document.getElementById("axis-x"));
  if (!xPicked) xSelect.value = defaultX(options);
  const ax = options.find((o) => o.key === xSelect.value) || options[0];
  const ay = options.find((o) => o.key === /** @type {HTMLSelectElement} */ (document.getElementById("axis-y")).value) || options[0];
  const points = /** @type {Array<{id: number, x: number, y: number}>} */ (S.order.map((i) => ({ id: i, x: ax.get(S.byIndex.get(i)), y: ay.get(S.byIndex.get(i)) })).filter((p) => p.x !== null && p.y !== null && p.x !== undefined && p.y !== undefined));
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

// Points of the 2-D front select like the other charts' (Plotly.react keeps this listener).
/** @param {Toggle} toggle */
export function selectFromScatter(toggle) {
  charts.scatter.on("plotly_click", (e) => { const p = e.points[0]; if (p && p.customdata != null) toggle(p.customdata); });
}

// ---- verdicts: best vs seed ---------------------------------------------------------------

export function drawVerdicts({ first = false } = {}) {
  if (!first && !drawn.has("verdicts")) return;
  drawn.add("verdicts");
  const best = bestIndex(S);
  const x = Object.values(VERDICT_NAMES);
  plot(charts.verdicts, [
    { name: "seed (#0)", type: "bar", x, y: verdictCounts(S, 0), marker: { color: COLORS.other } },
    { name: best === null ? "best" : `best (#${best})`, type: "bar", x, y: verdictCounts(S, best), marker: { color: COLORS.best } },
  ], { margin: MARGIN, barmode: "group", yaxis: { title: { text: "val tasks" }, tickformat: "d", rangemode: "tozero" }, legend: { orientation: "h", y: -0.2 } }, { react: true });
}
