// static/js/live-socket.js LiveSocket: a run's events are applied once each, in
// seq order; a gap reconnects from the last applied seq (the server replays it).
import { test } from "node:test";
import assert from "node:assert/strict";
import { LiveSocket } from "../../static/js/live-socket.js";
import { mergeEvent } from "../../static/js/run/state.js";
import { candidateNew, loaded } from "./snapshot.mjs";

// A LiveSocket whose connection is not a real websocket: `drops` counts the
// reconnects it asked for; `url()` is where it would reconnect to.
function liveSocket(after, onEvent) {
  const live = new LiveSocket({ path: "/ws/runs/7/", after, onEvent, onState: () => {} });
  live.drops = 0;
  live.socket.drop = () => { live.drops += 1; };
  return live;
}

const event = (seq, type = "trials") => ({ seq, type, data: {} });

test("events after the snapshot are applied in order, and it reconnects after the last one", () => {
  const applied = [];
  const live = liveSocket(3, (e) => applied.push(e.seq));
  [4, 5, 6].forEach((seq) => live.receive(event(seq)));
  assert.deepEqual(applied, [4, 5, 6]);
  assert.equal(live.drops, 0);
  assert.equal(live.socket.url(), "/ws/runs/7/?after=6");
});

test("a repeated or older event (the snapshot already had it, or a replay overlaps) is dropped", () => {
  const applied = [];
  const live = liveSocket(3, (e) => applied.push(e.seq));
  [2, 3, 4, 4, 3, 5].forEach((seq) => live.receive(event(seq)));
  assert.deepEqual(applied, [4, 5]);
  assert.equal(live.drops, 0);
});

test("a gap is not applied out of order: the socket reconnects from the last applied seq", () => {
  const applied = [];
  const live = liveSocket(0, (e) => applied.push(e.seq));
  live.receive(event(1));
  live.receive(event(3)); // 2 was lost
  assert.deepEqual(applied, [1]);
  assert.equal(live.drops, 1);
  assert.equal(live.socket.url(), "/ws/runs/7/?after=1");
  live.receive(event(4)); // still in flight on the old connection: not applied either
  assert.deepEqual(applied, [1]);
});

test("an event that fails to apply is logged and does not stop the stream", (t) => {
  const errors = t.mock.method(console, "error", () => {});
  const applied = [];
  const live = liveSocket(0, (e) => { if (e.seq === 1) throw new Error("bad"); applied.push(e.seq); });
  live.receive(event(1));
  live.receive(event(2));
  assert.deepEqual(applied, [2]);
  assert.equal(errors.mock.callCount(), 1);
});

test("a reconnect's replay that overlaps what was applied leaves the page as one clean pass would", () => {
  // The server's log: candidates 1..5 after a snapshot holding the seed (seq 0).
  const log = [1, 2, 3, 4, 5].map((index) => ({ ...candidateNew(index, { val: index / 10 }), seq: index }));
  const clean = loaded({ candidates: [{ index: 0, val_score: 0.1 }] });
  log.forEach((e) => mergeEvent(clean, e, 0));

  const S = loaded({ candidates: [{ index: 0, val_score: 0.1 }] });
  const live = liveSocket(0, (e) => mergeEvent(S, e, 0));
  // First connection: 1, 2, a duplicate 2, then 4 (3 lost) — it drops the connection.
  [log[0], log[1], log[1], log[3]].forEach((e) => live.receive(e));
  assert.equal(live.drops, 1);
  // The reconnect asks for everything after 2; the server replays 3..5, then a late duplicate arrives.
  assert.equal(live.socket.url(), "/ws/runs/7/?after=2");
  [log[2], log[3], log[4], log[1]].forEach((e) => live.receive(e));

  assert.deepEqual(S.order, clean.order);
  assert.deepEqual(S.order, [0, 1, 2, 3, 4, 5]);
  assert.deepEqual([...S.byIndex.values()].map((c) => c.val_score), [...clean.byIndex.values()].map((c) => c.val_score));
});

test("the browser tests' debug hook drops the connection", () => {
  const live = liveSocket(0, () => {});
  globalThis.__frontierSocket.close();
  assert.equal(live.drops, 1);
  assert.deepEqual(globalThis.__frontierSocket.state(), { lastSeq: 0, open: false });
});
