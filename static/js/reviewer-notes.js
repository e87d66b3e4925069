// @ts-check
// Reviewer notes GEPA reads (optimizer/reviewer_notes.py): the calls to
// /api/runs/<id>/notes and the list both pages draw. The run page lists the
// run's notes (live: note.saved / note.deleted events); the candidate page
// (templates/runs/candidate.html) writes one per task in its drill-down rows.
// Untrusted text reaches the DOM through textContent only.

/**
 * @typedef {object} Note
 * @property {number} id
 * @property {string} task_key
 * @property {string} text
 * @property {string} author
 * @property {string} created_at
 * @property {string} updated_at
 */

/** What a page needs to call the API: the run, the session's CSRF token, who is looking. */
export class NotesApi {
  /** @param {string} runId @param {string} csrf */
  constructor(runId, csrf) {
    this.url = `/api/runs/${runId}/notes`;
    this.csrf = csrf;
  }

  /** @returns {Promise<{notes: Note[], writable: boolean, refusal: string | null}>} */
  async list() {
    const response = await fetch(this.url, { headers: { Accept: "application/json" } });
    if (!response.ok) throw new Error(await problem(response));
    return response.json();
  }

  /** A new note, or `id`'s new text. @param {string} taskKey @param {string} text @param {number | null} id @returns {Promise<Note>} */
  async save(taskKey, text, id) {
    const response = await fetch(id === null ? this.url : `${this.url}/${id}`, {
      method: id === null ? "POST" : "PATCH",
      headers: { "Content-Type": "application/json", Accept: "application/json", "X-CSRFToken": this.csrf },
      body: JSON.stringify(id === null ? { task_key: taskKey, text } : { text }),
    });
    if (!response.ok) throw new Error(await problem(response));
    return response.json();
  }

  /** @param {number} id */
  async remove(id) {
    const response = await fetch(`${this.url}/${id}`, { method: "DELETE", headers: { "X-CSRFToken": this.csrf } });
    if (!response.ok && response.status !== 404) throw new Error(await problem(response));
  }
}

/** The API's one sentence for a refusal. @param {Response} response */
async function problem(response) {
  try {
    const body = await response.json();
    const first = (body.problems || [])[0];
    return first ? `${first.field}: ${first.message}` : body.detail || `error ${response.status}`;
  } catch {
    return `error ${response.status}`;
  }
}

/** The notes, by id, as events change them. */
export class NoteList {
  constructor() {
    /** @type {Map<number, Note>} */
    this.byId = new Map();
  }

  /** @param {Note[]} notes */
  load(notes) { this.byId = new Map(notes.map((n) => [n.id, n])); }

  /** note.saved @param {Note} note */
  saved(note) { this.byId.set(note.id, note); }

  /** note.deleted @param {{id: number}} data */
  deleted(data) { this.byId.delete(data.id); }

  /** Oldest first, as the API lists them. @returns {Note[]} */
  all() { return [...this.byId.values()].sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id - b.id); }

  /** @param {string} taskKey */
  onTask(taskKey) { return this.all().filter((n) => n.task_key === taskKey); }
}

/**
 * Draw `notes` into the list `ol`: task, author, text, and a Remove button where `canChange(note)`.
 * @param {HTMLElement} ol @param {Note[]} notes @param {(note: Note) => boolean} canChange @param {(note: Note) => void} onRemove
 */
export function renderNotes(ol, notes, canChange, onRemove) {
  ol.replaceChildren();
  for (const note of notes) {
    const li = document.createElement("li");
    li.dataset.noteId = String(note.id);
    li.dataset.taskKey = note.task_key;
    const task = document.createElement("strong");
    task.textContent = note.task_key;
    const who = document.createElement("span");
    who.className = "muted";
    who.textContent = ` · from ${note.author || "a reviewer"}${note.updated_at !== note.created_at ? " · edited" : ""}`;
    const text = document.createElement("p");
    text.className = "note-text";
    text.textContent = note.text;
    li.append(task, who, text);
    if (canChange(note)) {
      const remove = document.createElement("button");
      remove.type = "button";
      remove.textContent = "Remove";
      remove.dataset.action = "remove-note";
      remove.addEventListener("click", () => onRemove(note));
      li.append(remove);
    }
    ol.append(li);
  }
}

/** "read 1 reviewer note: val-003 (alice)" for a proposal's `notes`. @param {{task_key: string, author: string}[]} notes */
export function notesReadLine(notes) {
  if (!notes || !notes.length) return "";
  const which = notes.map((n) => `${n.task_key} (${n.author || "a reviewer"})`).join(", ");
  return `read ${notes.length} reviewer note${notes.length === 1 ? "" : "s"}: ${which}`;
}
