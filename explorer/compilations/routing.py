from django.urls import path

from explorer.compilations.consumers import CompilationEventsConsumer

websocket_urlpatterns = [
    path("ws/compilations/<str:compilation_id>/", CompilationEventsConsumer.as_asgi()),
]
