from django.urls import path

from explorer.review import api

urlpatterns = [
    path("compilations/<str:compilation_id>/comments", api.CommentListView.as_view()),
    path("compilations/<str:compilation_id>/comments/<int:comment_id>", api.CommentDetailView.as_view()),
    path("compilations/<str:compilation_id>/reviews", api.ReviewListView.as_view()),
]
