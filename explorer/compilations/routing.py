from django.urls import path

from explorer.compilations.consumers import CompilationEventsConsumer
from explorer.review.consumers import CommentsConsumer

websocket_urlpatterns = [
    path("ws/compilations/<str:compilation_id>/comments/", CommentsConsumer.as_asgi()),
    path("ws/compilations/<str:compilation_id>/", CompilationEventsConsumer.as_asgi()),
]
