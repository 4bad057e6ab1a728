"""Pages (the browser app's index.html) and ASGI wrappers."""
