"""The rules of kvcontract-lint: code, name and one-line summary of each."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["RULES", "Rule", "known_code", "rule"]


class Rule(NamedTuple):
    """One rule: ``KVC001`` style code, kebab-case name, what it finds, and whether --fix fixes it."""

    code: str
    name: str
    summary: str
    fixable: bool


RULES: dict[str, Rule] = {
    r.code: r
    for r in (
        Rule("KVC000", "syntax-error", "a file that cannot be parsed; the other files are still checked", False),
        Rule("KVC001", "missing-override", "a method that overrides a base method without @override", True),
        Rule("KVC002", "override-without-base", "@override on a method that no base defines", False),
        Rule(
            "KVC003",
            "contract-signature",
            "an override of a contract method whose parameters or annotations break the contract",
            False,
        ),
        Rule(
            "KVC004",
            "redundant-materialization",
            "list()/tuple() of a parameter the contract types as Sequence",
            True,
        ),
        Rule(
            "KVC005",
            "iterable-reused",
            "a parameter the contract types as Iterable used with len(), indexing, or iterated twice",
            False,
        ),
        Rule(
            "KVC006",
            "unannotated-contract-method",
            "an override of a contract method missing parameter or return annotations",
            False,
        ),
        Rule(
            "KVC007",
            "unresolved-base",
            "a base class that cannot be resolved, so overrides of it are unchecked",
            False,
        ),
    )
}


def rule(code: str) -> Rule:
    """The rule with ``code``; raises ``KeyError`` naming the known codes otherwise."""
    try:
        return RULES[code]
    except KeyError:
        raise KeyError(f"unknown rule code {code!r}; known codes: {', '.join(RULES)}") from None


def known_code(code: str) -> str:
    """``code`` in upper case when it is a rule's code or a prefix of one (``KVC``, ``KVC00``);
    raises ``ValueError`` listing the codes otherwise, so a typo never selects nothing."""
    upper = code.strip().upper()
    if not upper or not any(known.startswith(upper) for known in RULES):
        raise ValueError(f"{code!r} is no rule code or prefix of one; known codes: {', '.join(RULES)}")
    return upper
