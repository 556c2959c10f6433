"""Rendering of HTML and PNG reports (later)."""
