// static/js/run/frames.js: a burst of events (a reconnect's replay) redraws the
// whole-pool charts once per frame, not once per event.
import { test } from "node:test";
import assert from "node:assert/strict";
import { frameBatcher } from "../../static/js/run/frames.js";

function frames() {
  const queue = [];
  return { request: (callback) => queue.push(callback), run: () => queue.splice(0).forEach((callback) => callback()), get asked() { return queue.length; } };
}

test("draws asked many times before a frame run once each, in the order first asked", () => {
  const frame = frames();
  const later = frameBatcher(frame.request);
  const ran = [];
  const scatter = () => ran.push("scatter"), verdicts = () => ran.push("verdicts");
  for (let i = 0; i < 300; i += 1) { later(scatter); later(verdicts); }
  assert.equal(frame.asked, 1);
  assert.deepEqual(ran, []);
  frame.run();
  assert.deepEqual(ran, ["scatter", "verdicts"]);
});

test("a draw asked after (or during) a frame waits for the next one", () => {
  const frame = frames();
  const later = frameBatcher(frame.request);
  let runs = 0;
  const redraw = () => { runs += 1; };
  later(() => { redraw(); later(redraw); });
  frame.run();
  assert.equal(runs, 1);
  assert.equal(frame.asked, 1);
  frame.run();
  assert.equal(runs, 2);
  frame.run();
  assert.equal(runs, 2);
});
