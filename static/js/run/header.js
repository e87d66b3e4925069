// @ts-check
// The run page's header (status, best score, budget, cost, clock, an external
// run's client) and its explainer card (templates/runs/_explainer.html: the
// best prompt, what GEPA is doing now). Text reaches the DOM through textContent.
import { bestIndex, controlShown } from "./state.js";
import { clientLine, clock, headerFigures, promptText, proposalLine, statusLine } from "./text.js";
import { $, S, candidateUrl, root } from "./page.js";

export function renderHeader() {
  const r = S.run;
  const status = $("status");
  status.textContent = r.status;
  status.className = `status status-${r.status}`;
  $("phase").textContent = r.phase || "";
  const figures = headerFigures(S);
  $("best").textContent = figures.best;
  if (figures.delta) {
    const delta = $("delta");
    delta.textContent = figures.delta.text;
    delta.className = figures.delta.up ? "delta-up" : "delta-down";
  }
  /** @type {HTMLElement} */ ($("budget-bar").firstElementChild).style.width = `${figures.budgetPct}%`;
  $("budget").textContent = figures.budget;
  $("cost").textContent = figures.cost;
  $("tokens").textContent = figures.tokens;
  $("cost-split").textContent = figures.costSplit;
  $("stop-reason").textContent = r.stop_reason || "–";
  for (const control of /** @type {NodeListOf<HTMLElement>} */ (root.querySelectorAll("[data-when]"))) control.hidden = !controlShown(control.dataset.when || "", r);
  $("error").textContent = r.error || "";
  $("error-panel").hidden = !r.error;
  renderClock();
}

export function renderClock() {
  const now = clock(S, Date.now());
  if (!now) return;
  $("elapsed").textContent = now.elapsed;
  $("eta").textContent = now.eta;
  renderClient();
}

function renderClient() {
  const field = $("client");
  const line = clientLine(S, Date.now());
  if (!line || !field) return;
  field.textContent = line.text;
  field.dataset.state = line.state;
}

export async function pollClient() {
  if (S.run.kind !== "external" || !S.run.active) return;
  try {
    const response = await fetch(root.dataset.clientUrl, { headers: { Accept: "application/json" } });
    if (response.ok) Object.assign(S.run, await response.json());
  } catch { /* the next poll tries again */ }
  renderClient();
}

// ---- explainer card ------------------------------------------------------------------

// The best prompt's full text is fetched when the best changes (events carry previews only).
export async function renderBestPrompt() {
  const index = bestIndex(S);
  if (index === null || index === S.shownBest) return;
  S.shownBest = index;
  const url = root.dataset.candidateJsonUrl.replace(/\/0\/download\.json$/, `/${index}/download.json`);
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  if (!response.ok || S.shownBest !== index) return;
  const candidate = await response.json();
  $("best-prompt").textContent = promptText(candidate.components);
  $("best-index").textContent = String(index);
  /** @type {HTMLAnchorElement} */ ($("best-link")).href = candidateUrl(index);
  for (const field of ["best-prompt", "best-link"]) $(field).hidden = false;
  /** @type {HTMLElement} */ (root.querySelector('[data-copy="best-prompt-text"]')).hidden = false;
  $("no-best").hidden = true;
}

// One line of what GEPA is doing now, from the latest event.
/** @param {string} text */
export function doing(text) { $("doing-now").textContent = text; }
export const doingFromStatus = () => doing(statusLine(S.run));
export const doingFromProposal = (/** @type {import("./state.js").Proposal} */ p) => doing(proposalLine(p));
