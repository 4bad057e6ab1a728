from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "explorer.accounts"
    label = "accounts"
    verbose_name = "Accounts and teams"
