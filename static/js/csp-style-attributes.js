// @ts-check
// Style attributes through the CSSOM, so the Content Security Policy can forbid
// inline style outright (`style-src 'self'`, no 'unsafe-inline'; see
// CONTENT_SECURITY_POLICY in dashboard/middleware.py).
//
// Why: Plotly 4 styles most nodes through d3's `selection.style()` (CSSOM,
// allowed), but some through d3's `selection.attr("style", …)`, i.e.
// `el.setAttribute("style", …)`, which Chromium refuses under the policy
// ("style-src-attr", one securitypolicyviolation each, the node unstyled).
// Recorded on the run page (every chart hovered, legends and toolbar used) and
// a rich-text chart, 48 calls, all from d3's attr setter in the plotly bundle:
// - 45 rich-text <tspan>s (svg_text_utils): <b> font-weight, <i> font-style,
//   <sup>/<sub> font-size, <span style="color"> fill — hover labels ("#0"
//   bold), titles, axis titles, legend entries, annotations;
// - the colour bar's fill <rect>s (style reset to "");
// - a probe <image> whose `image-rendering` tells Plotly how it may paint a
//   heatmap (refused, it concludes the browser cannot scale pixels crisply).
// The CSSOM is outside the policy's reach (CSP3 governs markup and
// setAttribute, not script writing `el.style`), and `el.style.cssText = v`
// gives the node the same declarations the attribute would have (reflected as
// the `style` attribute too: `getAttribute("style")` still reads them back).
//
// What: `setAttribute` / `setAttributeNS` with the name `style` on any element
// that has a CSSOM `style` (HTML, SVG, MathML) write `style.cssText` instead;
// every other attribute goes to the browser's own method. Nothing else changes:
// markup parsed from strings (innerHTML) with style="…" is still refused, and
// the page scripts of this project use neither (they set `el.style.x` or
// classes). Loaded as a classic script in <head> of every page (base.html), so
// it runs before Plotly or any page script. tests/e2e/test_csp.py hovers, clicks
// legends and draws rich text under the policy and fails on any violation.
(() => {
  const proto = Element.prototype;
  if (/** @type {{frontierCssom?: boolean}} */ (proto.setAttribute).frontierCssom) return;
  const setAttribute = proto.setAttribute;
  const setAttributeNS = proto.setAttributeNS;
  /** @type {(el: Element) => el is Element & ElementCSSInlineStyle} */
  const cssom = (el) => /** @type {Partial<ElementCSSInlineStyle>} */ (el).style instanceof CSSStyleDeclaration;

  /** @this {Element} @param {string} name @param {string} value */
  function patchedSetAttribute(name, value) {
    if (typeof name === "string" && name.toLowerCase() === "style" && cssom(this)) {
      this.style.cssText = String(value);
      return;
    }
    setAttribute.call(this, name, value);
  }
  /** @this {Element} @param {string | null} namespace @param {string} name @param {string} value */
  function patchedSetAttributeNS(namespace, name, value) {
    if (!namespace && typeof name === "string" && name.toLowerCase() === "style" && cssom(this)) {
      this.style.cssText = String(value);
      return;
    }
    setAttributeNS.call(this, namespace, name, value);
  }
  patchedSetAttribute.frontierCssom = true;
  proto.setAttribute = patchedSetAttribute;
  proto.setAttributeNS = patchedSetAttributeNS;
})();
