// @ts-check
// The run page's three streams (proposals, trials, errors): newest first, each
// keeping as many items as the snapshot's tail, so a reload shows what the live
// page showed. Untrusted text reaches the DOM through textContent only.
import { clip, fmt } from "../format.js";
import { money, tokens } from "../money.js";
import { injectionText, minibatchSize, trialJudgments } from "./text.js";
import { S, el, root } from "./page.js";
import { notesReadLine } from "../reviewer-notes.js";

/**
 * @typedef {import("./state.js").Proposal} Proposal
 * @typedef {import("./state.js").TrialItem} TrialItem
 * @typedef {import("./state.js").RunError} RunError
 */

/** @param {"proposals" | "trials" | "errors"} id @param {HTMLLIElement} li */
function pushStream(id, li) {
  const list = /** @type {HTMLOListElement} */ (document.getElementById(`stream-${id}`));
  list.prepend(li);
  while (list.children.length > S.limits[id]) /** @type {Element} */ (list.lastElementChild).remove();
}

/** @param {Proposal} p */
export function renderProposal(p) {
  const li = el("li", undefined, p.accepted ? "accepted" : "rejected");
  const n = minibatchSize(p);
  li.append(el("strong", p.accepted ? `accepted → #${p.candidate}` : "rejected"),
    el("span", ` it. ${p.iteration} · from #${p.parent} · minibatch ${fmt(p.before / n, 2)} → ${fmt(p.after / n, 2)} · ${(p.components || []).join(", ")}`, "muted"),
    el("span", p.usage ? ` · ${money(p.cost, S.run.pricing)} · ${tokens(p.usage.total?.tokens_in + p.usage.total?.tokens_out)} tokens (reflection ${tokens(p.usage.reflection?.tokens_in + p.usage.reflection?.tokens_out)})` : "", "muted proposal-cost"));
  const read = notesReadLine(p.notes || []);
  if (read) li.append(el("div", read, "notes-read"));
  const details = el("details");
  details.append(el("summary", "proposed text"));
  for (const [name, text] of Object.entries(p.texts || {})) { details.append(el("div", name, "muted"), el("pre", clip(text, S.limits.text))); }
  if (p.reasoning) details.append(el("div", "reasoning", "muted"), el("pre", clip(p.reasoning, S.limits.text)));
  for (const note of p.notes || []) details.append(el("div", `reviewer note on ${note.task_key} (from ${note.author || "a reviewer"})`, "muted"), el("pre", clip(note.text, S.limits.text)));
  li.append(details);
  pushStream("proposals", li);
}

// A user's edited candidate (candidate.injected): one line per status change.
/** @param {import("./state.js").Injection} d */
export function renderInjection(d) {
  const li = el("li", undefined, `injection injection-${d.status}`);
  li.dataset.injection = String(d.injection);
  li.append(el("strong", d.status === "applied" ? `human → #${d.candidate}` : `human (${d.status})`),
    el("span", ` ${injectionText(d)}`, "muted"));
  pushStream("proposals", li);
}

/** @param {TrialItem} item @param {number | null | undefined} candidate @param {string} split */
export function renderTrial(item, candidate, split) {
  const li = el("li");
  li.append(el("strong", item.task_key), el("span", ` ${candidate === null || candidate === undefined ? "proposal" : `#${candidate}`} · ${split} · `, "muted"),
    el("span", fmt(item.score)), el("span", " · "));
  const judged = trialJudgments(item, S.judging);
  li.append(el("span", judged.verdict, `verdict-${item.verdict}`));
  if (judged.passed) li.append(el("span", " · "), el("span", judged.passed, item.passed ? "verdict-pass" : "verdict-fail"));
  li.append(el("pre", clip(item.output || "", S.limits.text)));
  const reasons = (item.reasons || []).slice(0, S.limits.reasons);
  if (reasons.length) { const ul = el("ul", undefined, "reasons"); for (const r of reasons) ul.append(el("li", r)); li.append(ul); }
  // A minibatch task (the train split: what reflections read): the drill-down's "Note for GEPA".
  if (split === "train" && root.dataset.notesWritable === "true") li.append(noteButton(item.task_key));
  pushStream("trials", li);
}

/** @param {RunError} e */
export function renderError(e) {
  const li = el("li", undefined, "error");
  li.append(el("strong", e.where), el("span", ` ${e.iteration === null || e.iteration === undefined ? "" : `it. ${e.iteration} · `}`, "muted"), el("span", e.message));
  pushStream("errors", li);
}

/** "Note for GEPA" on a task: run-page.js opens the notes card's editor on it (one listener for the stream). @param {string} taskKey */
function noteButton(taskKey) {
  const button = el("button", "Note for GEPA", "note-for-gepa");
  button.type = "button";
  button.dataset.action = "note-for-gepa";
  button.dataset.taskKey = taskKey;
  return button;
}
