// @ts-check
// A new check's id, from its type and its argument. GEPA's reflection reads
// every miss as "<verifier id>/<check id>: <reason>" (docs/verifier-semantics.md),
// so an id should say what the check asks of the output ("contains-refund",
// "max-length-500", "json-valid"), not "check-2". Like the engine's default id
// for a check written without one, an id already taken gets "-2", "-3" ….

/** An argument longer than this (as a slug) is left out: the type alone names the check. */
export const MAX_ARGUMENT = 24;

// A pattern made of words only (anchors allowed) reads well in an id; others do not.
const PLAIN_PATTERN = /^\^?[\p{L}\p{N} _-]+\$?$/u;

/**
 * Lower-case letters and digits joined by "-", accents dropped: `Où est` → `ou-est`.
 * @param {unknown} text @returns {string}
 */
export function slug(text) {
  return String(text ?? "").normalize("NFKD").replace(/\p{M}/gu, "").toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, "-").replace(/^-+|-+$/g, "");
}

/**
 * What a check of `type` is about: the text it looks for, its plain pattern, its limit or its keys.
 * @param {string} type @param {Record<string, unknown> | undefined} params @returns {string}
 */
function argumentOf(type, params) {
  const p = params || {};
  if (type === "json_keys") return Array.isArray(p.requiredKeys) ? p.requiredKeys.join(" ") : "";
  if (type === "regex") return typeof p.pattern === "string" && PLAIN_PATTERN.test(p.pattern) ? p.pattern : "";
  return typeof p.value === "string" || typeof p.value === "number" ? String(p.value) : "";
}

/**
 * The id for a check of `type` with `params`, unique among `taken` (the ids of
 * the verifier's other checks): `contains-refund`, `regex`, then `regex-2`.
 * @param {string | undefined} type @param {Record<string, unknown> | undefined} params
 * @param {Iterable<unknown>} taken @returns {string}
 */
export function deriveCheckId(type, params, taken) {
  const base = slug(type) || "check";
  const argument = slug(argumentOf(type ?? "", params));
  const id = argument && argument.length <= MAX_ARGUMENT ? `${base}-${argument}` : base;
  const used = new Set(taken);
  if (!used.has(id)) return id;
  let n = 2;
  while (used.has(`${id}-${n}`)) n += 1;
  return `${id}-${n}`;
}
