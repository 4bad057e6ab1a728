"""The JSON HTTP API under /api/."""
