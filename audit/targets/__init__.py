"""Targets: what is audited.  Candidates and their registry, evaluation paths (compute formats,
semantics), C kernels, engines, device dumps and golden data.  Imports ``oracle`` and below.
"""
