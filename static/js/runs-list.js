// @ts-check
// The runs list, kept current by pushes, not polling.
//
// /ws/runs/ sends `{"type": "run.row", "data": row}` for every run this user
// may see whenever its status, phase, budget or best score changes — including
// runs launched from another tab, the API or the CLI, which appear at the top.
// A row is merged in place (or removed when it no longer matches the filter);
// `{"type": "run.hidden", "data": {"id": …}}` removes a run no longer shared with this user.
// Each row carries the run's last event seq, so an older row never overwrites
// a newer one. On every (re)connect the page reloads /runs/list.json: rows that
// changed while the socket was down (or before it first opened) are not missed.
// The socket reconnects by itself (live-socket.js ReconnectingSocket) and
// shows "live" / "reconnecting" / "denied".
//
// Debug hook (browser tests, console): window.__frontierRunsSocket.close()
// breaks the connection as a network drop would.

import { ReconnectingSocket } from "./live-socket.js";
import { fmt } from "./format.js";
import { money } from "./money.js";

/**
 * A row of the list (optimizer/runs/summary.py run_list_row), as the page reads it.
 * @typedef {object} RunRow
 * @property {number} id
 * @property {string} name
 * @property {string} status
 * @property {string} phase
 * @property {string} kind
 * @property {boolean} archived
 * @property {string[]} [tags]
 * @property {number | null} best_score
 * @property {number | null} delta
 * @property {number} budget_used
 * @property {number} budget_total
 * @property {number} budget_pct
 * @property {number} cost
 * @property {string} pricing
 * @property {{label: string, is_simulator: boolean}} model
 * @property {string} task_set
 * @property {number | null} task_set_id
 * @property {string} owner
 * @property {string} created_at ISO 8601 (a saved run has one)
 * @property {string | null} started_at
 * @property {string | null} finished_at
 * @property {number} last_seq
 */

const LIMIT = 200; // as LIST_LIMIT in dashboard/pages/runs.py
const table = /** @type {HTMLTableElement} */ (document.getElementById("runs-table"));
const body = /** @type {HTMLTableSectionElement} */ (table.querySelector("tbody"));
const form = /** @type {HTMLFormElement} */ (document.getElementById("runs-filter"));
const indicator = /** @type {HTMLElement | null} */ (document.querySelector("[data-field=live]"));

// The server renders each budget bar's fill as data-pct (no inline style: the CSP forbids it).
for (const fill of /** @type {NodeListOf<HTMLElement>} */ (body.querySelectorAll(".bar > span[data-pct]"))) fill.style.width = `${Number(fill.dataset.pct) || 0}%`;

const when = (/** @type {string | null | undefined} */ iso) => (iso ? iso.slice(0, 16).replace("T", " ") : "–");

// The filter the page was loaded with (as the server applied it), not what is typed but not yet submitted.
const applied = new URLSearchParams(location.search);
/** @type {Set<string | null>} */
const statuses = new Set([.../** @type {NodeListOf<HTMLOptionElement>} */ (form.querySelectorAll("select[name=status] option"))].map((o) => o.value).filter(Boolean));
const filter = {
  status: statuses.has(applied.get("status")) ? applied.get("status") : "",
  q: (applied.get("q") || "").trim().slice(0, 200).toLowerCase(),
  taskSet: /^\d+$/.test(applied.get("task_set") || "") ? Number(applied.get("task_set")) : null,
  verifier: (applied.get("verifier") || "").trim(),
  model: (applied.get("model") || "").trim(),
  archived: applied.get("archived") === "1",
};
// Newest first with no verifier filter: a pushed row is placed here. Otherwise (another
// sort, or a filter a row does not carry) the server re-answers the list, at most every 2 s.
const serverOrdered = table.dataset.sort !== "-created" || !!filter.verifier;

/** @param {RunRow} r */
function matches(r) {
  if (filter.status && r.status !== filter.status) return false;
  if (filter.taskSet !== null && r.task_set_id !== filter.taskSet) return false;
  if (filter.model && r.model.label !== filter.model) return false;
  if (!!r.archived !== filter.archived) return false;
  return !filter.q || [r.name, r.task_set, r.owner].some((v) => (v || "").toLowerCase().includes(filter.q));
}

/** @type {ReturnType<typeof setTimeout> | null} */
let resyncTimer = null;
function resyncSoon() {
  if (!resyncTimer) resyncTimer = setTimeout(() => { resyncTimer = null; resync(); }, 2000);
}

/** @param {...(Node | string)} children */
function cell(...children) {
  const td = document.createElement("td");
  td.append(...children);
  return td;
}

/** @param {string} text @param {string} [cls] */
function span(text, cls) {
  const el = document.createElement("span");
  el.textContent = text;
  if (cls) el.className = cls;
  return el;
}

/** @param {RunRow} r */
function row(r) {
  const tr = document.createElement("tr");
  tr.dataset.runId = String(r.id);
  tr.dataset.lastSeq = String(r.last_seq);
  tr.dataset.createdAt = r.created_at || "";
  const link = document.createElement("a");
  link.href = `${r.id}/`;
  link.textContent = r.name;
  const best = cell(span(fmt(r.best_score)));
  best.className = "num";
  if (r.delta !== null && r.delta !== undefined) {
    best.append(" ", span(`(${r.delta >= 0 ? "+" : ""}${fmt(r.delta)})`, r.delta >= 0 ? "delta-up" : "delta-down"));
  }
  const bar = document.createElement("div");
  bar.className = "bar";
  const fill = document.createElement("span");
  fill.style.width = `${Number(r.budget_pct) || 0}%`;
  bar.append(fill);
  const model = cell(span(r.model.label));
  if (r.model.is_simulator) model.append(" ", span("simulator", "badge-sim"));
  const name = cell(link);
  for (const tag of r.tags || []) name.append(" ", span(tag, "tag"));
  if (r.kind === "external") model.append(" ", span("external", "badge-external"));
  tr.append(
    name,
    cell(span(r.status, `status status-${r.status}`), " ", span(r.phase || "", "muted")),
    best,
    cell(bar, span(`${r.budget_used} / ${r.budget_total}`, "muted")),
    Object.assign(cell(money(r.cost, r.pricing)), { className: "num" }),
    model,
    cell(r.task_set || "–"),
    cell(r.owner),
    cell(when(r.started_at)),
    cell(when(r.finished_at)),
  );
  return tr;
}

function emptyRow() {
  const tr = document.createElement("tr");
  tr.className = "empty-row";
  const td = cell("No runs match. Author a verifier, load a task set, then launch a run to watch GEPA improve your prompt live.");
  td.colSpan = 10;
  tr.append(td);
  return tr;
}

function runRows() {
  return [.../** @type {NodeListOf<HTMLTableRowElement>} */ (body.querySelectorAll("tr[data-run-id]"))];
}

/** @param {RunRow[]} runs */
function showAll(runs) {
  body.replaceChildren(...(runs.length ? runs.map(row) : [emptyRow()]));
}

// Newest first, as the server orders the list.
/** @param {HTMLTableRowElement} tr @param {string} createdAt */
function insert(tr, createdAt) {
  const t = Date.parse(createdAt);
  const after = runRows().find((other) => Date.parse(/** @type {string} */ (other.dataset.createdAt)) < t);
  body.querySelector(".empty-row")?.remove();
  body.insertBefore(tr, after || null);
  runRows().slice(LIMIT).forEach((extra) => extra.remove());
}

/** @param {number} id */
function hide(id) {
  body.querySelector(`tr[data-run-id="${CSS.escape(String(id))}"]`)?.remove();
  if (!runRows().length && !body.querySelector(".empty-row")) body.append(emptyRow());
}

/** @param {RunRow} r */
function merge(r) {
  if (pushedDuringResync) pushedDuringResync.push(r);
  const current = /** @type {HTMLTableRowElement | null} */ (body.querySelector(`tr[data-run-id="${CSS.escape(String(r.id))}"]`));
  if (current && Number(current.dataset.lastSeq) > r.last_seq) return; // a late, older row
  if (!matches(r)) {
    hide(r.id);
    return;
  }
  if (current) current.replaceWith(row(r));
  else if (!serverOrdered) insert(row(r), r.created_at);
  if (serverOrdered && !pushedDuringResync) resyncSoon();
}

// Rows pushed while list.json is in flight, merged again over its answer
// (merge keeps whichever of the two is newer).
/** @type {RunRow[] | null} */
let pushedDuringResync = null;

async function resync() {
  pushedDuringResync = [];
  try {
    const response = await fetch(`${table.dataset.jsonUrl}${location.search}`, { headers: { Accept: "application/json" } });
    if (response.ok) showAll((await response.json()).runs);
  } catch (error) {
    console.error("could not reload the runs list", error);
  } finally {
    const pushed = /** @type {RunRow[]} */ (pushedDuringResync);
    pushedDuringResync = null;
    pushed.forEach(merge);
  }
}

/** @param {import("./live-socket.js").SocketState} state */
function setState(state) {
  if (!indicator) return;
  indicator.dataset.state = state;
  indicator.textContent = /** @type {Record<string, string>} */ ({ live: "● live", reconnecting: "reconnecting…", denied: "access denied: reload to log in" })[state] || state;
}

const socket = new ReconnectingSocket({
  url: () => "/ws/runs/",
  onOpen: resync,
  onMessage: (event) => {
    if (event.type === "run.row") merge(event.data);
    else if (event.type === "run.hidden") hide(event.data.id);
  },
  onState: setState,
});
window.__frontierRunsSocket = { close: () => socket.drop() };
socket.connect();
