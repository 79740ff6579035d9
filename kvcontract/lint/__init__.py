"""kvcontract-lint: static checks that subclasses carry ``@override`` and honour the contracts.

Library use: :func:`lint_files` with :class:`LintSettings`; command line: ``kvcontract-lint``
(:func:`kvcontract.lint.cli.main`); also a flake8 plugin and a pre-commit hook.
"""

from kvcontract.lint.codes import RULES, Rule
from kvcontract.lint.finding import Finding
from kvcontract.lint.runner import LintResult, LintSettings, lint_files

__all__ = ["RULES", "Finding", "LintResult", "LintSettings", "Rule", "lint_files"]
