"""The web playground: its static files (index.html, app.js, style.css) and router.py, which
serves them at `/` and `/playground/`."""
