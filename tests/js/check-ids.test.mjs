// static/js/check-ids.js: a new check's id, from its type and its argument.
import { test } from "node:test";
import assert from "node:assert/strict";
import { MAX_ARGUMENT, deriveCheckId, slug } from "../../static/js/check-ids.js";

test("a check is named by its type and its short argument", () => {
  assert.equal(deriveCheckId("contains", { value: "refund" }, []), "contains-refund");
  assert.equal(deriveCheckId("not_contains", { value: "Gift card" }, []), "not-contains-gift-card");
  assert.equal(deriveCheckId("max_length", { value: 500 }, []), "max-length-500");
  assert.equal(deriveCheckId("json_keys", { requiredKeys: ["name", "room"] }, []), "json-keys-name-room");
  assert.equal(deriveCheckId("regex", { pattern: "^Dear" }, []), "regex-dear");
  assert.equal(deriveCheckId("json_valid", {}, []), "json-valid");
});

test("an argument that is long or not words leaves the type alone", () => {
  assert.equal(deriveCheckId("contains", { value: "x".repeat(MAX_ARGUMENT + 1) }, []), "contains");
  assert.equal(deriveCheckId("regex", { pattern: "\\d{3}-\\d{4}" }, []), "regex");
  assert.equal(deriveCheckId("contains", { value: "?!" }, []), "contains");
  assert.equal(deriveCheckId(undefined, undefined, []), "check");
});

test("an id already taken in the verifier gets -2, -3 …", () => {
  assert.equal(deriveCheckId("regex", {}, ["regex"]), "regex-2");
  assert.equal(deriveCheckId("regex", {}, ["regex", "regex-2", undefined]), "regex-3");
  assert.equal(deriveCheckId("contains", { value: "refund" }, ["contains"]), "contains-refund");
});

test("a slug keeps letters and digits of any script, lower-cased, accents dropped", () => {
  assert.equal(slug("Où est  la gare ?"), "ou-est-la-gare");
  assert.equal(slug("Straße"), "straße");
  assert.equal(slug("<b>x</b>"), "b-x-b");
  assert.equal(slug(null), "");
});
