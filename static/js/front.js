// @ts-check
// The run page's fronts (pure: Node's tests import it, tests/js/front.test.mjs).
//
// frontMembers: which candidates are "on the front", the same rule as
// optimizer/front.py (front_members), see there. `scores`: [[index, [score|null per task]], …].
// Returns the member indices, ascending.
const PRECISION = 1000;

/**
 * @param {Array<[number, Array<number | null | undefined>]>} scores
 * @returns {number[]}
 */
export function frontMembers(scores) {
  const rows = [...scores].sort((a, b) => a[0] - b[0]);
  if (!rows.length || !rows[0][1].length) return [];
  /** @type {Array<[number, number[]]>} */
  const vectors = rows.map(([index, row]) => [index, row.map((v) => (v === null || v === undefined ? -Infinity : Math.round(v * PRECISION) / PRECISION))]);
  const tops = vectors[0][1].map((_, k) => Math.max(...vectors.map(([, v]) => v[k])));
  const dominates = (/** @type {number[]} */ a, /** @type {number[]} */ b) => a.every((x, k) => x >= b[k]) && a.some((x, k) => x > b[k]);
  const seen = new Set();
  const members = [];
  for (const [index, vector] of vectors) {
    const key = vector.join(",");
    if (seen.has(key)) continue; // an earlier candidate with the same scores stands for this one
    seen.add(key);
    if (!vector.some((v, k) => v === tops[k] && v !== -Infinity)) continue;
    if (vectors.some(([, other]) => dominates(other, vector))) continue;
    members.push(index);
  }
  return members;
}

// The 2-D front on two picked axes: the points no other point beats on both.
// points: [{x, y, id}]; xUp / yUp: true when more is better on that axis
// (scores), false when less is (prompt length, latency). Ties stand together.
/**
 * @template {{x: number, y: number}} P
 * @param {P[]} points
 * @param {boolean} xUp
 * @param {boolean} yUp
 * @returns {P[]}
 */
export function nonDominated(points, xUp, yUp) {
  // One sort and one sweep (a 10,000-candidate run compared every pair): best x
  // first; a point is beaten by an earlier group (strictly better x) whose best y
  // is at least its own, or by one of its own group (the same x) with a better y.
  const sx = xUp ? 1 : -1, sy = yUp ? 1 : -1;
  const sorted = [...points].sort((a, b) => sx * (b.x - a.x));
  const kept = new Set();
  let earlierBest = -Infinity; // the best y (times sy) of the groups before this one
  for (let k = 0; k < sorted.length;) {
    let end = k, groupBest = -Infinity;
    while (end < sorted.length && sorted[end].x === sorted[k].x) { groupBest = Math.max(groupBest, sy * sorted[end].y); end += 1; }
    for (let j = k; j < end; j++) { const y = sy * sorted[j].y; if (y === groupBest && y > earlierBest) kept.add(sorted[j]); }
    earlierBest = Math.max(earlierBest, groupBest);
    k = end;
  }
  return points.filter((p) => kept.has(p));
}
