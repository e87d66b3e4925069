// The run page's fronts (pure: Node's tests import it, tests/js/front.test.mjs).
//
// frontMembers: which candidates are "on the front", the same rule as
// optimizer/front.py (front_members), see there. `scores`: [[index, [score|null per task]], …].
// Returns the member indices, ascending.
const PRECISION = 1000;

export function frontMembers(scores) {
  const rows = [...scores].sort((a, b) => a[0] - b[0]);
  if (!rows.length || !rows[0][1].length) return [];
  const vectors = rows.map(([index, row]) => [index, row.map((v) => (v === null || v === undefined ? -Infinity : Math.round(v * PRECISION) / PRECISION))]);
  const tops = vectors[0][1].map((_, k) => Math.max(...vectors.map(([, v]) => v[k])));
  const dominates = (a, b) => a.every((x, k) => x >= b[k]) && a.some((x, k) => x > b[k]);
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
export function nonDominated(points, xUp, yUp) {
  const better = (a, b, up) => (up ? a >= b : a <= b);
  const strictly = (a, b, up) => (up ? a > b : a < b);
  return points.filter((p) => !points.some((q) => q !== p && better(q.x, p.x, xUp) && better(q.y, p.y, yUp) && (strictly(q.x, p.x, xUp) || strictly(q.y, p.y, yUp))));
}
