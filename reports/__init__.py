"""Reporters, one module per output: html (with figures), junit, markdown."""
