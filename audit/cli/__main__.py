"""``python -m audit.cli``: the ``actaudit`` command."""

from audit.cli import console_main

console_main()
