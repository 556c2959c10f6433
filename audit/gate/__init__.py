"""The CI gate: the audit spec's schema, the identity recorded with a baseline entry, the
baseline and the check, and the entry kinds (formats, diffs).  Imports ``compare`` and below.
"""
