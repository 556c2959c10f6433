"""Repair: which candidate to ship (``suggest``), operation counts and cost, correctly rounded
kernels synthesized by ``fit`` and the emitters that write them.  Imports ``measure`` and below.
"""
