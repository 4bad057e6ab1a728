"""Uploaded models, compilations and their event logs."""
