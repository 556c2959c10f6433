"""The distribution's version, in a module of its own: every document records it, and
importing it loads nothing else."""

__version__ = "0.1.0"
