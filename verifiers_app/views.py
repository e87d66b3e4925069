from django.shortcuts import render

from verifiers_app.models import Verifier


def verifier_list(request):
    verifiers = Verifier.objects.visible_to(request.user).select_related("owner")
    return render(request, "verifiers/list.html", {"verifiers": verifiers})
