"""Numbers: formats and their exact rounding and ulp, the input domains of a format, scipy.special
imported lightly.  The lowest stage: it imports nothing of actaudit but the shared modules.
"""
