from django.contrib import messages
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from dashboard.account_services import api_token_create, api_token_revoke
from dashboard.forms import ApiTokenForm
from dashboard.models import ApiToken


def token_list(request):
    """List the user's tokens; a POST creates one and shows it this once."""
    new_token, error = None, None
    if request.method == "POST":
        form = ApiTokenForm(request.POST)
        try:
            if not form.is_valid():
                raise ValueError("; ".join(form.problems()))
            _, new_token = api_token_create(user=request.user, name=form.cleaned_data["name"])
        except ValueError as exc:
            error = str(exc)
    tokens = ApiToken.objects.filter(user=request.user)
    return render(
        request,
        "accounts/tokens.html",
        {"tokens": tokens, "new_token": new_token, "error": error},
        status=400 if error else 200,
    )


@require_POST
def token_revoke(request, pk):
    api_token = get_object_or_404(ApiToken, pk=pk, user=request.user)
    api_token_revoke(api_token=api_token)
    messages.success(request, f"Revoked {api_token.name}; scripts using it now get 401.")
    return redirect("account:tokens")
