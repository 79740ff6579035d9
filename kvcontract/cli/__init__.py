"""The ``kvcontract`` command: validate and show configs, run the simulation, lint subclasses.

User errors never show a traceback: the boundaries (config loading, trace reading, the
checks of arguments and output paths before a run) raise the errors named in
``kvcontract.cli.entry``, and :func:`main` alone turns them into one line on stderr and exit status 2.
A closed standard output (``kvcontract config schema | head -1``) ends quietly with the
status a shell gives a process killed by ``SIGPIPE``.
"""

from kvcontract.cli.entry import main

__all__ = ["main"]
