"""Compare: two implementations asked the same question (``diff``), the same function asked in
different ways (``consistency``), and the engines side by side (``matrix``).  Imports
``measure`` and below.
"""
