// @ts-check
// The run page (templates/runs/detail.html): draws the JSON snapshot, then
// merges websocket events into the state (run/state.js) and redraws what each
// one touched. Modules:
//   run/state.js    the model and event merging (pure; tests/js/)
//   run/text.js     the page's words and header numbers (pure; tests/js/)
//   run/frames.js   whole-pool redraws batched per animation frame (pure; tests/js/)
//   run/page.js     the one state and the page's DOM anchors
//   run/charts.js   the five Plotly charts
//   run/header.js   header, clock, explainer card
//   run/table.js    candidate table and selection
//   run/streams.js  proposals, trials, errors
//   run/holdout.js  the "Val vs held-out" panel and the held-out budget line
// Every untrusted string reaches the DOM through textContent and Plotly through esc().
import { LiveSocket } from "./live-socket.js";
import { wireCopyButtons } from "./clipboard.js";
import { addScoresPage, loadSnapshot, mergeEvent, moreRows, recomputeMembers, unzip } from "./run/state.js";
import { candidateLine } from "./run/text.js";
import { frameBatcher } from "./run/frames.js";
import { $, S, root } from "./run/page.js";
import * as charts from "./run/charts.js";
import { doing, doingFromProposal, doingFromStatus, pollClient, renderBestPrompt, renderClock, renderHeader } from "./run/header.js";
import { refreshRows, renderSelection, renderTableNote, showTableRows, toggleSelected } from "./run/table.js";
import { renderError, renderInjection, renderProposal, renderTrial } from "./run/streams.js";
import { NoteList, NotesApi, renderNotes } from "./reviewer-notes.js";
import { refreshValVsHoldout } from "./run/holdout.js";

/**
 * @typedef {import("./run/state.js").Candidate} Candidate
 * @typedef {import("./run/state.js").Proposal} Proposal
 * @typedef {import("./run/state.js").RunError} RunError
 * @typedef {import("./run/state.js").RunEvent} RunEvent
 * @typedef {import("./run/state.js").Snapshot} Snapshot
 * @typedef {import("./run/state.js").Trials} Trials
 */

// The run's reviewer notes: the snapshot's, then note.saved / note.deleted events.
const notes = new NoteList();
/** @type {string | null} why the run takes no notes (external, imported) */
let notesRefusal = null;
const notesApi = new NotesApi(String(root.dataset.runId), /** @type {HTMLInputElement} */ (root.querySelector("#reviewer-notes [name=csrfmiddlewaretoken]")).value);
function drawNotes() {
  const all = notes.all();
  const writable = root.dataset.notesWritable === "true" && !notesRefusal;
  renderNotes(/** @type {HTMLElement} */ (document.getElementById("notes-list")), all,
    (note) => !notesRefusal && (writable || note.author === root.dataset.user),
    async (note) => {
      try { await notesApi.remove(note.id); notes.deleted(note); drawNotes(); } catch (error) { $("notes-empty").textContent = String(error instanceof Error ? error.message : error); $("notes-empty").hidden = false; }
    });
  $("notes-empty").hidden = all.length > 0;
}

// "Note for GEPA" on a trial (run/streams.js) opens the notes card's editor on that
// task, in a place that stays put while the streams grow: your note there, written or edited.
/** @param {HTMLFormElement} editor */
function wireNoteEditor(editor) {
  const area = /** @type {HTMLTextAreaElement} */ (editor.querySelector("textarea"));
  const status = /** @type {HTMLElement} */ (editor.querySelector('[data-field="note-status"]'));
  const yours = () => notes.onTask(editor.dataset.taskKey || "").filter((n) => n.author === root.dataset.user).pop();
  document.getElementById("stream-trials")?.addEventListener("click", (event) => {
    const button = /** @type {HTMLElement} */ (event.target).closest('[data-action="note-for-gepa"]');
    if (!(button instanceof HTMLElement)) return;
    editor.dataset.taskKey = button.dataset.taskKey || "";
    $("note-task").textContent = editor.dataset.taskKey;
    area.setAttribute("aria-label", `Note for GEPA on ${editor.dataset.taskKey}`);
    area.value = yours()?.text || "";
    status.textContent = "";
    editor.hidden = false;
    area.focus();
  });
  editor.querySelector('[data-action="cancel-note"]')?.addEventListener("click", () => { editor.hidden = true; });
  editor.addEventListener("submit", async (event) => {
    event.preventDefault();
    const mine = yours();
    status.textContent = "saving…";
    try {
      notes.saved(await notesApi.save(editor.dataset.taskKey || "", area.value, mine ? mine.id : null));
      status.textContent = "saved: the next reflections on this task read it";
      drawNotes();
    } catch (error) {
      status.textContent = error instanceof Error ? error.message : String(error);
    }
  });
}

// Whole-pool redraws: at most once per animation frame (run/frames.js).
const later = frameBatcher((draw) => requestAnimationFrame(draw));

// Members by the shared rule (front.js), as the server's recorder computes them:
// once per frame, however many candidates a replay brings.
function recomputeFront() {
  recomputeMembers(S);
  refreshRows();
}

// What each event redraws, once run/state.js has merged it (`changed`: what mergeEvent returned).
/** @type {Record<string, (changed: any) => void>} */
const redraws = {
  "run.status": () => {
    renderHeader();
    doingFromStatus();
  },
  "run.budget": () => {
    renderHeader();
    later(charts.redrawBestLine);
  },
  "candidate.new": (/** @type {Candidate | null} */ c) => {
    if (!c) return;
    if (S.run.active) doing(candidateLine(c));
    charts.extendScore(c);
    later(charts.redrawBestLine);
    charts.extendLineage(c);
    later(recomputeFront);
    later(charts.relayoutLineage);
    charts.extendFront(c);
    if (S.tableShown === S.order.length - 1) showTableRows(S.order.length); else renderTableNote();
    refreshRows();
    later(charts.drawScatter);
    later(charts.drawVerdicts);
    renderHeader();
  },
  "front.updated": () => {
    later(recomputeFront);
    renderBestPrompt();
    later(charts.restyleFront); later(charts.restyleLineage); later(charts.drawVerdicts); refreshRows(); renderHeader();
  },
  proposal: (/** @type {Proposal} */ d) => {
    renderProposal(d);
    if (S.run.active) doingFromProposal(d);
    if (!d.accepted) charts.extendRejected(d);
  },
  "candidate.injected": (/** @type {import("./run/state.js").Injection} */ d) => renderInjection(d),
  trials: (/** @type {Trials} */ d) => { for (const item of d.items || []) renderTrial(item, d.candidate, d.split); },
  error: (/** @type {RunError} */ d) => renderError(d),
  "run.paused": () => {
    renderHeader();
    doingFromStatus();
  },
  "note.saved": (/** @type {import("./reviewer-notes.js").Note} */ d) => { notes.saved(d); drawNotes(); },
  "note.deleted": (/** @type {{id: number}} */ d) => { notes.deleted(d); drawNotes(); },
  "holdout.scored": () => { refreshValVsHoldout(); },
  "run.finished": () => {
    refreshValVsHoldout();
    renderHeader();
    doingFromStatus();
    renderBestPrompt(); later(charts.restyleLineage); later(charts.drawVerdicts); refreshRows();
  },
};

/** @param {RunEvent} event */
function applyEvent(event) {
  const started = performance.now();
  const changed = mergeEvent(S, event, Date.now());
  redraws[event.type]?.(changed);
  const stats = window.__frontierRun;
  stats.lastSeq = event.seq;
  stats.applied += 1;
  stats.slowestApplyMs[event.type] = Math.max(stats.slowestApplyMs[event.type] || 0, performance.now() - started);
}

// "Show more rows" under a big run's heatmap: the next page of scores.json.
async function loadMoreRows() {
  const button = /** @type {HTMLButtonElement} */ (root.querySelector('[data-action="more-rows"]'));
  button.disabled = true;
  try {
    const response = await fetch(`${root.dataset.scoresUrl}?after=${S.rowsCursor}`, { headers: { Accept: "application/json" } });
    if (!response.ok) return;
    addScoresPage(S, await response.json());
    await charts.drawFront();
    refreshRows();
  } finally {
    button.disabled = !moreRows(S);
  }
}

// Where the page's first draw spends its time (ms since navigation, per step):
// window.__frontierRun.bootMs, printed by bench/scale.py.
/** @type {Record<string, number>} */
const bootMs = {};
const mark = (/** @type {string} */ step) => { bootMs[step] = Math.round(performance.now()); };

// A big run's charts below the fold: each drawn when it comes near the view, the
// rest one after another once the socket is live (pending until then).
let drawDeferred = () => {};
/** @param {Record<string, () => void>} draws chart element id → its first draw */
function deferCharts(draws) {
  const pending = new Map(Object.entries(draws));
  const drawOne = (/** @type {string} */ id) => { const draw = pending.get(id); if (!draw) return; pending.delete(id); observer.unobserve(/** @type {HTMLElement} */ (document.getElementById(id))); draw(); };
  const observer = new IntersectionObserver((entries) => entries.filter((e) => e.isIntersecting).forEach((e) => drawOne(e.target.id)), { rootMargin: "200px" });
  for (const id of pending.keys()) observer.observe(/** @type {HTMLElement} */ (document.getElementById(id)));
  drawDeferred = () => {
    drawDeferred = () => {};
    const next = () => { const [id] = pending.keys(); if (id === undefined) return; drawOne(id); setTimeout(next, 0); };
    requestAnimationFrame(() => setTimeout(next, 0)); // after the frame that shows "● live"
  };
}

// The candidate table and the streams, skipped until the page is live (runs.css), are
// laid out after the frame that shows "● live".
function layOutBelow() {
  requestAnimationFrame(() => setTimeout(() => root.classList.add("laid-out"), 0));
}

async function boot() {
  mark("script");
  const response = await fetch(root.dataset.snapshotUrl, { headers: { Accept: "application/json" } });
  if (!response.ok) { $("live").textContent = `could not load the run (${response.status})`; return; }
  mark("response");
  /** @type {Snapshot} */
  const snap = await response.json();
  mark("json");
  loadSnapshot(S, snap);
  mark("state");
  // Read by browser tests and handy in the console.
  window.__frontierRun = { lastSeq: S.run.last_seq, applied: 0, slowestApplyMs: {}, candidates: () => S.order.length, bootMs };

  charts.drawScore(unzip(snap.rejected), toggleSelected);
  mark("score");
  charts.drawLineage();
  charts.selectFromLineage(toggleSelected);
  root.querySelector('[data-action="all-lineage"]')?.addEventListener("click", () => charts.drawLineage({ all: true }));
  mark("lineage");
  root.querySelector('[data-action="more-rows"]')?.addEventListener("click", loadMoreRows);
  charts.setupAxisPickers();
  const below = {
    "chart-front": () => { charts.drawFront(); charts.selectFromFront(toggleSelected); },
    "chart-scatter": () => { charts.drawScatter({ first: true }); charts.selectFromScatter(toggleSelected); },
    "chart-verdicts": () => charts.drawVerdicts({ first: true }),
  };
  if (S.order.length > charts.DEFER_AFTER) {
    charts.renderRowsNote();
    deferCharts(below);
  } else {
    Object.values(below).forEach((draw) => draw());
  }
  mark("charts");
  showTableRows(S.limits.table_rows ?? Infinity);
  root.querySelector('[data-action="more-table-rows"]')?.addEventListener("click", () => { showTableRows(S.tableShown + S.limits.table_rows); refreshRows(); });
  root.querySelector('[data-action="all-table-rows"]')?.addEventListener("click", () => { showTableRows(Infinity); refreshRows(); });
  mark("table");
  // Proposals and users' edited candidates share a stream, in seq order.
  const injections = snap.injections || [];
  let next = 0;
  for (const p of snap.proposals) {
    while (next < injections.length && (injections[next].seq ?? 0) < (p.seq ?? 0)) renderInjection(injections[next++]);
    renderProposal(p);
  }
  injections.slice(next).forEach(renderInjection);
  snap.trials.forEach((t) => renderTrial(t, t.candidate, t.split));
  snap.errors.forEach(renderError);
  notesRefusal = snap.notes_refusal;
  notes.load(snap.reviewer_notes || []);
  drawNotes();
  const editor = /** @type {HTMLFormElement | null} */ (document.getElementById("note-editor"));
  if (editor) wireNoteEditor(editor);
  refreshRows();
  mark("streams");
  renderHeader();
  renderSelection({ charts: false });
  S.shownBest = $("best-prompt").hidden ? null : Number($("best-index").textContent);
  renderBestPrompt();
  const lastProposal = snap.proposals[snap.proposals.length - 1];
  if (S.run.active && S.run.status === "running" && lastProposal) doingFromProposal(lastProposal); else doingFromStatus();
  wireCopyButtons(root);
  /** @type {HTMLElement} */ (root.querySelector('[data-action="clear-selection"]')).addEventListener("click", () => { S.selected.clear(); renderSelection(); });
  /** @type {HTMLElement} */ (root.querySelector('[data-action="compare"]')).addEventListener("click", (e) => { if (S.selected.size < 2) e.preventDefault(); });
  setInterval(renderClock, 1000);
  if (S.run.kind === "external") setInterval(pollClient, 5000);

  const live = $("live");
  const socket = new LiveSocket({
    path: root.dataset.wsPath,
    after: S.run.last_seq,
    onEvent: applyEvent,
    onState: (state) => { if (state === "live" && !bootMs.live) { mark("live"); layOutBelow(); } drawDeferred(); live.dataset.state = state; live.textContent = /** @type {Record<string, string>} */ ({ live: "● live", reconnecting: "reconnecting…", denied: "access denied: reload to log in" })[state] || state; },
  });
  mark("socket");
  socket.connect();
}

boot();
