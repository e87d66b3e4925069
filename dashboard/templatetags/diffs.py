"""The prompt diff as HTML (templates/compare/_diff.html)."""

from __future__ import annotations

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from optimizer.textdiff import ADDED, REMOVED

register = template.Library()

_TAGS = {ADDED: ("<ins>", "</ins>"), REMOVED: ("<del>", "</del>")}


@register.filter
def diff_markup(component) -> SafeString:
    """A component's text, escaped, with its diff's added words in <ins> and
    removed ones in <del>; the plain text when it has nothing to diff against.
    One pass over the pieces: a template loop over a 4,000-word prompt's
    thousands of pieces costs more than the diff itself."""
    if component.ops is None:
        return escape(component.text)
    parts = []
    for op, text in component.ops:
        opening, closing = _TAGS.get(op, ("", ""))
        parts.append(f"{opening}{escape(text)}{closing}")
    return mark_safe("".join(parts))  # noqa: S308 - every piece of text is escaped above
