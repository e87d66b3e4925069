// @ts-check
// The candidate page's drill-down (templates/runs/candidate.html): each task's
// row ends with "Note for GEPA". The textarea holds your note on that task (a
// save writes it, or edits it); the notes others wrote on it are listed above.
// Every change reaches the run page live through its note.* events.
import { NoteList, NotesApi, renderNotes } from "./reviewer-notes.js";

const section = /** @type {HTMLElement} */ (document.getElementById("scores"));
const csrf = /** @type {HTMLInputElement | null} */ (section.querySelector("[name=csrfmiddlewaretoken]"));
const api = new NotesApi(String(section.dataset.runId), csrf ? csrf.value : "");
const user = section.dataset.user || "";
const notes = new NoteList();
let writable = section.dataset.notesWritable === "true";

/** Your newest note on the task, the one the textarea edits. @param {string} taskKey */
function yours(taskKey) {
  return notes.onTask(taskKey).filter((n) => n.author === user).pop() || null;
}

/** @param {HTMLDetailsElement} box */
function draw(box) {
  const taskKey = box.dataset.taskKey || "";
  const mine = yours(taskKey);
  const others = notes.onTask(taskKey).filter((n) => n !== mine);
  renderNotes(/** @type {HTMLElement} */ (box.querySelector(".task-notes")), others,
    () => writable,
    async (note) => { await change(box, () => api.remove(note.id).then(() => notes.deleted(note)), "removed"); });
  const area = /** @type {HTMLTextAreaElement} */ (box.querySelector("textarea"));
  if (document.activeElement !== area) area.value = mine ? mine.text : "";
  const canWrite = writable || mine !== null;
  area.hidden = !canWrite;
  /** @type {HTMLButtonElement} */ (box.querySelector('[data-action="save-note"]')).hidden = !canWrite;
  /** @type {HTMLButtonElement} */ (box.querySelector('[data-action="remove-note"]')).hidden = mine === null;
  const summary = /** @type {HTMLElement} */ (box.querySelector("summary"));
  const count = notes.onTask(taskKey).length;
  summary.textContent = count ? `Note for GEPA (${count})` : "Note for GEPA";
}

/** Run `action`, say how it went in the box's status line. @param {HTMLDetailsElement} box @param {() => Promise<unknown>} action @param {string} done */
async function change(box, action, done) {
  const status = /** @type {HTMLElement} */ (box.querySelector('[data-field="note-status"]'));
  status.textContent = "saving…";
  try {
    await action();
    status.textContent = done;
  } catch (error) {
    status.textContent = error instanceof Error ? error.message : String(error);
    return;
  }
  draw(box);
}

async function boot() {
  const boxes = /** @type {HTMLDetailsElement[]} */ ([...document.querySelectorAll("details.gepa-note")]);
  try {
    const listed = await api.list();
    notes.load(listed.notes);
    writable = writable && listed.writable;
  } catch (error) {
    for (const box of boxes) /** @type {HTMLElement} */ (box.querySelector('[data-field="note-status"]')).textContent = String(error);
    return;
  }
  for (const box of boxes) {
    draw(box);
    const taskKey = box.dataset.taskKey || "";
    const area = /** @type {HTMLTextAreaElement} */ (box.querySelector("textarea"));
    box.querySelector('[data-action="save-note"]')?.addEventListener("click", () => change(box, async () => {
      const mine = yours(taskKey);
      notes.saved(await api.save(taskKey, area.value, mine ? mine.id : null));
      area.blur();
    }, "saved: the next reflections on this task read it"));
    box.querySelector('[data-action="remove-note"]')?.addEventListener("click", () => change(box, async () => {
      const mine = yours(taskKey);
      if (mine) { await api.remove(mine.id); notes.deleted(mine); }
    }, "removed"));
  }
}

boot();
