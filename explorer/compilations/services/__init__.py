"""Writes. Views, consumers and tasks call these; they hold the service's logic."""
