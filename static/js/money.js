// @ts-check
// How every page writes a run's cost: the demo simulator is free and says so; an
// endpoint with no price set says that instead of a misleading $0.
/**
 * @param {number | null | undefined} cost
 * @param {string} [pricing] "priced", "unpriced", "simulator" or "not_reported" (optimizer/runs/budget.py)
 */
export function money(cost, pricing = "priced") {
  if (pricing === "simulator") return "free (demo simulator)";
  if (pricing === "unpriced") return "no price set";
  if (pricing === "not_reported") return "not reported";
  const value = Number(cost) || 0;
  return value === 0 ? "$0" : value < 0.01 ? `$${value.toFixed(4)}` : `$${value.toFixed(2)}`;
}

/** @param {number | null | undefined} count */
export function tokens(count) {
  const n = Number(count) || 0;
  return n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}k` : String(n);
}
