from django.urls import path

from dashboard.pages import accounts as account_views

app_name = "account"
urlpatterns = [
    path("tokens/", account_views.token_list, name="tokens"),
    path("tokens/<int:pk>/revoke/", account_views.token_revoke, name="revoke"),
]
