// @ts-check
// The run page's "Val vs held-out" panel and its held-out budget line
// (templates/runs/_val_vs_holdout.html, _holdout_budget.html). The server
// renders both from the database; when the held-out scores arrive
// (holdout.scored) or the run ends, this asks the panel's JSON again
// (optimizer/val_vs_holdout.py) and redraws. Text reaches the DOM through
// textContent only.
import { fmt } from "../format.js";
import { $, root } from "./page.js";

/**
 * @typedef {object} Side
 * @property {number} tasks
 * @property {number | null} seed_mean
 * @property {number | null} best_mean
 * @property {{text: string, confirmed: boolean, enough: boolean}} lift
 *
 * @typedef {object} ValVsHoldout
 * @property {string | null} split
 * @property {boolean} enabled
 * @property {number} planned_evaluations
 * @property {number} evaluations
 * @property {number | null} best_index
 * @property {Side | null} val
 * @property {Side | null} holdout
 * @property {string} state "scored" | "pending" | "not_scored" | "off" | "none"
 * @property {string | null} verdict "confirmed" | "not_confirmed" | "no_lift"
 * @property {string} message
 */

const panel = /** @type {HTMLElement} */ (root.querySelector("#val-vs-holdout"));

/** @param {ValVsHoldout} h */
export function renderValVsHoldout(h) {
  panel.dataset.state = h.state;
  panel.dataset.verdict = h.verdict || "";
  $("vh-best-index").textContent = h.best_index === null ? "" : `#${h.best_index}`;
  for (const [name, side] of /** @type {[string, Side | null][]} */ ([["val", h.val], ["holdout", h.holdout]])) {
    const row = /** @type {HTMLElement} */ (panel.querySelector(`tr[data-split="${name}"]`));
    const cell = (/** @type {string} */ key) => /** @type {HTMLElement} */ (row.querySelector(`[data-cell="${key}"]`));
    cell("tasks").textContent = side ? String(side.tasks) : "–";
    cell("seed").textContent = fmt(side?.seed_mean);
    cell("best").textContent = fmt(side?.best_mean);
    cell("lift").textContent = side ? side.lift.text : "–";
  }
  const verdict = $("vh-verdict");
  verdict.className = `vh-verdict vh-${h.verdict || h.state}`;
  const mark = h.verdict === "not_confirmed" ? "⚠ " : h.verdict === "confirmed" ? "✓ " : "";
  const strong = document.createElement("strong");
  strong.textContent = mark;
  const message = document.createElement("span");
  message.dataset.field = "vh-message";
  message.textContent = h.message ? `${h.message.charAt(0).toUpperCase()}${h.message.slice(1)}.` : "";
  verdict.replaceChildren(...(mark ? [strong] : []), message);
  $("holdout-budget").textContent = h.split ? `${h.evaluations} of ${h.planned_evaluations} evaluations` : h.enabled ? "none" : "off";
}

// Asked again on holdout.scored and run.finished; a slower earlier answer never overwrites a later one.
let asked = 0;
export async function refreshValVsHoldout() {
  const mine = ++asked;
  const response = await fetch(/** @type {string} */ (panel.dataset.url), { headers: { Accept: "application/json" } });
  if (!response.ok || mine !== asked) return;
  const report = await response.json();
  if (mine === asked) renderValVsHoldout(report);
}
