from django.apps import AppConfig


class ReviewConfig(AppConfig):
    name = "explorer.review"
    label = "review"
    verbose_name = "Comments and reviews"
