"""Measure: a sweep of targets over a domain against the oracle, and everything it measures:
errors, findings, clip ranges, weighted figures, quantized and block-scaled outputs, lookup
tables, chunked execution and checkpoints, the oracle's self-test and certification.
Imports ``targets`` and below.
"""
