from django.apps import AppConfig


class WebConfig(AppConfig):
    name = "explorer.web"
    label = "web"
