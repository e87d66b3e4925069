from django.template import engines

from dashboard.compare_selectors import ComponentDiff
from optimizer.textdiff import word_diff

# The diff as a template loop writes it, each piece autoescaped.
LOOP = (
    '<pre class="diff">{% if comp.ops is None %}{{ comp.text }}{% else %}'
    "{% for op, text in comp.ops %}"
    '{% if op == "added" %}<ins>{{ text }}</ins>{% elif op == "removed" %}<del>{{ text }}</del>'
    "{% else %}{{ text }}{% endif %}{% endfor %}{% endif %}</pre>"
)


def _render(source: str, comp: ComponentDiff) -> str:
    return engines["django"].from_string(source).render({"comp": comp})


def test_the_diff_markup_escapes_the_prompt_text_as_the_template_loop_did():
    old = 'Say <b>"hi"</b> & wave.\nNever run <script>alert(1)</script>.'
    new = "Say <i>'hi'</i> & wave.\nNever run <script>alert(2)</script> or =cmd."
    for comp in (
        ComponentDiff("system", new, word_diff(old, new)),
        ComponentDiff("system", new, None),
        ComponentDiff("system", "", word_diff("", "")),
    ):
        html = _render("{% include 'compare/_diff.html' %}", comp)
        assert html == _render(LOOP, comp) + "\n"
    html = _render(
        "{% include 'compare/_diff.html' %}", ComponentDiff("s", new, word_diff(old, new))
    )
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<ins>" in html and "<del>" in html
