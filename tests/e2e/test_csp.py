"""The Content Security Policy holds on every page: each page of the URLconf
(resolved from it, so a new page is covered without touching this file) is
loaded in Chromium against a real server, with a recorded run, a verifier with
two versions, a task set and a token to point at; the policy header is there
and the browser reports no violation and no console error."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from tests.e2e.conftest import E2E_USERNAME
from tests.url_patterns import argument_names, url_patterns

pytestmark = pytest.mark.e2e

SEED = """
import json
from django.contrib.auth import get_user_model
from dashboard.account_services import api_token_create
from optimizer.examples import load_examples
from tests.dashboard.compare_factories import make_compare_run
from verifiers_app.models import Verifier
from verifiers_app.services import verifier_update
owner = get_user_model().objects.get(username={username!r})
load_examples(user=owner)
run = make_compare_run(owner, candidates=4, val_tasks=4, holdout_tasks=2, name="CSP sweep")
verifier = Verifier.objects.filter(owner=owner).order_by("pk").first()
verifier_update(verifier=verifier, spec={{**verifier.spec, "passThreshold": 0.5}}, user=owner)
token, _ = api_token_create(user=owner, name="csp sweep")
print(json.dumps({{"run_id": run.pk, "index": 0, "slug": verifier.slug, "pk": run.task_set_id,
                  "task_pk": run.task_set.tasks.first().pk, "token_pk": token.pk}}))
"""
# Not pages: POST-only actions and file downloads.
NOT_PAGES = {"runs:control", "verifiers:delete", "verifiers:duplicate", "account:revoke", "logout", "tasksets:split",
             "tasksets:assign", "runs:dry_run", "verifiers:export", "tasksets:import_confirm", "tasksets:export",
             "tasksets:duplicate", "tasksets:delete"}
# Pages that also need a query to show something.
QUERIES = {"compare:task": "?task=val-000&c=0&c=1"}
# Pages that answer 400 without state made elsewhere (an upload token): their
# error page is still loaded and checked for violations.
NEEDS_STATE = {"/tasksets/import/preview/"}
RECORD_VIOLATIONS = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}:${e.columnNumber} ${e.sample}`));
"""


def pages(ids: dict) -> list[str]:
    urls = []
    for name, pattern in url_patterns():
        namespace = name.split(":")[0]
        if namespace == "api" or (namespace == "admin" and name != "admin:index") or name in NOT_PAGES:
            continue
        if any(name.endswith(suffix) for suffix in ("download_txt", "download_json", "download_best_txt",
                                                    "download_best_json", "export_json", "export_csv", "list_json",
                                                    "snapshot")):
            continue
        values = dict(ids, pk=ids["token_pk"] if namespace == "account" else ids["pk"])
        urls.append(reverse(name, kwargs={arg: values[arg] for arg in argument_names(pattern)}) + QUERIES.get(name, ""))
    return urls


def test_every_page_loads_under_the_strict_policy_without_a_violation(page, frontier_server):
    ids = json.loads(frontier_server.manage("shell", "-c", SEED.format(username=E2E_USERNAME)).stdout.strip().splitlines()[-1])
    errors: list[str] = []
    # Console errors that name the policy (a blocked eval, a refused connection);
    # other console errors are the pages' own business, not this test's.
    page.on("console", lambda message: errors.append(f"{page.url}: {message.text}")
            if message.type == "error" and "Content Security Policy" in message.text else None)
    page.add_init_script(RECORD_VIOLATIONS)
    visited = pages(ids)
    assert len(visited) >= 20
    for url in visited:
        probe = page.request.get(url, max_redirects=0)
        if probe.status == 405 or "attachment" in probe.headers.get("content-disposition", ""):
            continue  # a POST-only action or a download: not a page
        response = page.goto(url)
        assert response.status < 400 or (url in NEEDS_STATE and response.status == 400), (url, response.status)
        assert "script-src 'self'" in response.headers.get("content-security-policy", ""), url
        page.wait_for_timeout(300)  # page scripts run, charts draw
        assert page.evaluate("window.__csp") == [], (url, page.evaluate("window.__csp"))
    assert errors == []
