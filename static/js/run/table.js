// @ts-check
// The run page's candidate table and the selection (rows, chart clicks) that
// the Compare link carries.
import { fmt } from "../format.js";
import { money } from "../money.js";
import { bestIndex, leadCounts, role, tableRowsNext } from "./state.js";
import { leadText, originText, tableNote } from "./text.js";
import { drawScatter, restyleLineage, restyleSelected } from "./charts.js";
import { $, S, candidateUrl, root } from "./page.js";

/**
 * The re-scoring the table shows (`?scoring=<id>`, written by
 * templates/runs/_scorings.html), or null for the original: each candidate's
 * [score, rank, on front] under it, by index, and its best.
 * @typedef {{id: number, name: string, best: number | null, front: number[], rows: Record<string, [number | null, number | null, boolean]>}} ScoringTable
 */
const scoringNode = document.getElementById("scoring-table");
/** @type {ScoringTable | null} */
export const scoring = scoringNode ? JSON.parse(scoringNode.textContent || "null") : null;
/** The compare view's links carry the shown re-scoring: its val scores under it too. */
const compareScoring = scoring ? `&scoring=${scoring.id}` : "";

/** The score cell under the shown scoring: "0.812 · rank 3"; a candidate it did not score (born after it), "–". */
/** @param {ScoringTable} table @param {number} index */
export function scoringScoreText(table, index) {
  const row = table.rows[String(index)];
  if (!row) return "–";
  return row[1] === null ? fmt(row[0]) : `${fmt(row[0])} · rank ${row[1]}`;
}

/** @param {import("./state.js").Candidate} c */
export function candidateRow(c) {
  const tr = document.createElement("tr");
  tr.dataset.candidateIndex = String(c.index);
  const cells = [document.createElement("td")];
  const box = document.createElement("input");
  box.type = "checkbox"; box.setAttribute("aria-label", `select candidate ${c.index}`);
  box.addEventListener("change", () => toggleSelected(c.index, box.checked));
  cells[0].append(box);
  const link = document.createElement("a");
  link.href = candidateUrl(c.index); link.textContent = `#${c.index}`;
  /** @param {string} text @param {string} [cls] */
  const td = (text, cls) => { const el = document.createElement("td"); el.textContent = text; if (cls) el.className = cls; return el; };
  const idCell = td("", "num"); idCell.append(link);
  const origin = td(originText(c), "origin");
  if (c.origin === "human") {
    // One click to what the user changed: the compare view of its parent and it.
    const diff = document.createElement("a");
    diff.href = `${root.dataset.compareUrl}?c=${c.parents[0] ?? 0}&c=${c.index}${compareScoring}`;
    diff.textContent = "diff"; diff.className = "diff-link";
    origin.append(" · ", diff);
  }
  cells.push(idCell, origin, td(c.parents.map((p) => `#${p}`).join(" + ") || "–"),
    td(scoring ? scoringScoreText(scoring, c.index) : fmt(c.val_score), "num val-score"),
    td(leadText(S, c.index), "num lead-count"), td(String(c.metric_calls), "num"),
    td(money(c.cost, S.run.pricing), "num cost"), td("", "front-mark"));
  tr.append(...cells);
  return tr;
}

export function refreshRows() {
  const leads = leadCounts(S), best = bestIndex(S); // once, not once per row
  for (const tr of /** @type {NodeListOf<HTMLTableRowElement>} */ (document.querySelectorAll("#candidate-rows tr"))) {
    const i = Number(tr.dataset.candidateIndex);
    // The cells candidateRow made.
    /** @type {HTMLElement} */ (tr.querySelector(".lead-count")).textContent = leadText(S, i, leads);
    /** @type {HTMLElement} */ (tr.querySelector(".front-mark")).textContent = scoring
      ? (i === scoring.best ? "best" : scoring.rows[String(i)]?.[2] ? "★ front" : "")
      : role(S, i, best) === "best" ? "best" : S.members.has(i) ? "★ front" : "";
    tr.classList.toggle("selected", S.selected.has(i));
    /** @type {HTMLInputElement} */ (tr.querySelector("input")).checked = S.selected.has(i);
  }
}

// A big run's table starts with its first rows in candidate order (S.limits.table_rows);
// "Show more" adds the next as many, "Show all" the rest. A live candidate joins
// the table when every one before it is in it.
/** @param {number} upto */
export function showTableRows(upto) {
  const next = tableRowsNext(S, upto);
  if (next.length) {
    /** @type {HTMLElement} */ (document.getElementById("candidate-rows")).append(...next.map((i) => candidateRow(S.byIndex.get(i))));
    S.tableShown += next.length;
  }
  renderTableNote();
}

export function renderTableNote() {
  const note = $("table-rows");
  if (!note) return;
  note.hidden = S.tableShown >= S.order.length;
  $("table-count").textContent = tableNote(S);
}

// ---- selection -------------------------------------------------------------------

/** @param {number} index */
export function toggleSelected(index, on = !S.selected.has(index)) {
  if (on) S.selected.add(index); else S.selected.delete(index);
  renderSelection();
}

// At boot the charts were just drawn with nothing selected: only the bar and the link need filling.
export function renderSelection({ charts: redraw = true } = {}) {
  const chosen = [...S.selected].sort((a, b) => a - b);
  $("selection").textContent = chosen.length ? `Selected: ${chosen.map((i) => `#${i}`).join(", ")}` : "No candidates selected";
  const link = /** @type {HTMLAnchorElement} */ (root.querySelector('[data-action="compare"]'));
  const query = new URLSearchParams(chosen.map((i) => ["c", String(i)]));
  link.href = `${root.dataset.compareUrl}?${query}${compareScoring}`;
  link.setAttribute("aria-disabled", chosen.length < 2 ? "true" : "false");
  if (!redraw) return;
  restyleSelected(chosen.filter((i) => S.byIndex.has(i)).map((i) => S.byIndex.get(i)));
  restyleLineage();
  drawScatter();
  refreshRows();
}
