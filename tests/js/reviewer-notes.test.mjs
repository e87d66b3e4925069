// static/js/reviewer-notes.js: the notes a page holds as note.* events change them,
// and the line a proposal shows for the notes its reflection read.
import { test } from "node:test";
import assert from "node:assert/strict";
import { NoteList, notesReadLine } from "../../static/js/reviewer-notes.js";

const note = (id, task_key, created_at, text = "a note") => ({ id, task_key, text, author: "alice", created_at, updated_at: created_at });

test("saved notes replace their earlier text and deleted ones leave, oldest first", () => {
  const notes = new NoteList();
  notes.load([note(2, "t1", "2026-01-01T00:00:02Z")]);
  notes.saved(note(1, "t0", "2026-01-01T00:00:01Z"));
  notes.saved(note(2, "t1", "2026-01-01T00:00:02Z", "edited"));
  assert.deepEqual(notes.all().map((n) => [n.id, n.text]), [[1, "a note"], [2, "edited"]]);
  assert.deepEqual(notes.onTask("t1").map((n) => n.id), [2]);
  notes.deleted({ id: 2 });
  notes.deleted({ id: 99 }); // a replayed event for a note already gone
  assert.deepEqual(notes.all().map((n) => n.id), [1]);
});

test("a proposal says how many notes it read and on which tasks, from whom", () => {
  assert.equal(notesReadLine([]), "");
  assert.equal(notesReadLine([{ task_key: "val-003", author: "alice" }]), "read 1 reviewer note: val-003 (alice)");
  assert.equal(
    notesReadLine([{ task_key: "a", author: "alice" }, { task_key: "b", author: "" }]),
    "read 2 reviewer notes: a (alice), b (a reviewer)",
  );
});
