"""The oracle: the reference functions, each defined once in mpmath, and their correctly rounded
values decided exactly (with the exact backward and fused forms).  Imports only ``numbers``.
"""
