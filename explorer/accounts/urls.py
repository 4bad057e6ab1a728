from django.urls import path

from explorer.accounts import api

urlpatterns = [
    path("auth/signup", api.SignUpView.as_view()),
    path("auth/login", api.LoginView.as_view()),
    path("auth/logout", api.LogoutView.as_view()),
    path("auth/me", api.MeView.as_view()),
    path("auth/token", api.TokenView.as_view()),
    path("teams", api.TeamListView.as_view()),
    path("teams/<slug:slug>", api.TeamDetailView.as_view()),
    path("teams/<slug:slug>/members", api.TeamMembersView.as_view()),
    path("teams/<slug:slug>/members/<str:username>", api.TeamMemberView.as_view()),
]
