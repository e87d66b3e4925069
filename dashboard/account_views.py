from django.shortcuts import render

from dashboard.models import ApiToken


def token_list(request):
    tokens = ApiToken.objects.filter(user=request.user)
    return render(request, "account/tokens.html", {"tokens": tokens})
