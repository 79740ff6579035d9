"""Runtime enforcement of the contracts: ``@override`` at class creation, beartype call checks.

Every class that inherits a contract is processed by :func:`enforce_class` when it is
created. Its overrides must carry ``@override``, and the contract methods it implements
(or takes from a plain mixin) are wrapped so that each call is checked against the
contract's own signature.

Three modes, from ``KVCONTRACT_CHECKS`` or :func:`configure`: ``off`` removes the wrappers;
``on`` (the default) checks every argument's type but only one element of each sequence
per call (beartype's O(1) strategy, sampling the first element), so a call costs the same
for 1 key or 10,000; ``full`` checks every element of every container argument and return
value (O(n), for tests and CI).
"""

from __future__ import annotations

import inspect
import os
import re
import threading
import types
import weakref
from collections import abc
from collections.abc import Callable, Iterator, KeysView, Mapping, Set, ValuesView
from dataclasses import dataclass
from typing import (
    Annotated,
    Any,
    ClassVar,
    Literal,
    ParamSpec,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

from beartype import BeartypeConf, BeartypeStrategy, beartype
from beartype.door import is_bearable
from beartype.roar import BeartypeCallHintParamViolation, BeartypeCallHintReturnViolation
from beartype.vale import Is

from kvcontract.contracts.base import Contract

__all__ = [
    "CHECK_MODES",
    "ENV_VAR",
    "CheckMode",
    "ContractDefinitionError",
    "ContractViolation",
    "checked",
    "checks_enabled",
    "checks_mode",
    "configure",
    "contract_violations",
    "enforce_class",
    "unchecked",
]

_T = TypeVar("_T")
_P = ParamSpec("_P")
_R = TypeVar("_R")

CheckMode = Literal["off", "on", "full"]
"""How contract calls are checked: not at all, one element per container (O(1)), every element."""

CHECK_MODES: tuple[CheckMode, ...] = ("off", "on", "full")
"""The values ``KVCONTRACT_CHECKS`` accepts."""

ENV_VAR = "KVCONTRACT_CHECKS"
"""Environment variable read once, at the first class or call that needs it: ``off``, ``on`` (default) or ``full``."""

_EXEMPT_FROM_OVERRIDE = frozenset({"__init__", "__new__", "__init_subclass__", "__post_init__"})
_MACHINERY_MODULES = frozenset({"typing", "typing_extensions", "abc"})
"""Modules whose functions are planted on classes by the runtime (``__subclasshook__``...)."""
_WRAPPER_ATTRIBUTES = ("__func__", "fget", "fset", "fdel", "func", "__wrapped__")
_ORIGINAL_ATTRIBUTE = "__kvcontract_original__"
_FROM_MIXIN_ATTRIBUTE = "__kvcontract_from_mixin__"
"""Marks a wrapper that enforcement put on a class for a contract method a plain mixin provides."""


class ContractDefinitionError(TypeError):
    """A class breaks a contract's definition rules (an override without ``@override``...)."""


class ContractViolation(TypeError):
    """A call of a contract method passed or returned a value its contract does not allow."""


def _mode_from_environment() -> CheckMode:
    value = os.environ.get(ENV_VAR, "on").strip().lower()
    if value in {"on", "1", "true", "yes"}:
        return "on"
    if value in {"off", "0", "false", "no"}:
        return "off"
    if value == "full":
        return "full"
    raise ValueError(
        f"{ENV_VAR}={value!r} is not understood: set it to one of "
        f"{', '.join(CHECK_MODES)} (on samples one element per container, full checks every element)"
    )


@dataclass
class _State:
    checks: bool
    full: bool
    classes: weakref.WeakSet[type]


_state: _State | None = None


def _settings() -> _State:
    """The settings, read from the environment the first time they are needed.

    Read on first use rather than at import, so that ``import kvcontract`` never fails and a
    command line can report a bad ``KVCONTRACT_CHECKS`` as one line (call :func:`checks_mode`).
    """
    global _state
    if _state is None:
        mode = _mode_from_environment()
        _state = _State(checks=mode != "off", full=mode == "full", classes=weakref.WeakSet())
    return _state


_violations = 0
_violations_lock = threading.Lock()


def contract_violations() -> int:
    """Contract calls refused with a :class:`ContractViolation` since the process started (for the metrics)."""
    return _violations


def _count_violation() -> None:
    global _violations
    with _violations_lock:
        _violations += 1


def checks_enabled() -> bool:
    """Whether contract calls are checked now."""
    return _settings().checks


def checks_mode() -> CheckMode:
    """The mode contract calls are checked in now; raises ``ValueError`` for a bad ``KVCONTRACT_CHECKS``."""
    state = _settings()
    if not state.checks:
        return "off"
    return "full" if state.full else "on"


def configure(*, checks: bool | None = None, full: bool | None = None) -> None:
    """Switch the call checks on or off, and between sampled and full, for every contract class.

    ``full=True`` checks every element of container arguments and returns, ``full=False`` one
    per call; ``None`` leaves a setting as it is, so ``configure(checks=True)`` keeps a full
    mode that ``KVCONTRACT_CHECKS=full`` chose. Off restores the original methods, so an
    unchecked call costs nothing extra.
    """
    state = _settings()
    new_checks = state.checks if checks is None else checks
    new_full = state.full if full is None else full
    if (new_checks, new_full) == (state.checks, state.full):
        return
    state.checks, state.full = new_checks, new_full
    for cls in list(state.classes):
        _apply(cls, state)


def enforce_class(cls: type) -> None:
    """Check ``cls``'s overrides for ``@override`` and wrap its contract methods with call checks.

    Contract methods ``cls`` takes from a plain mixin (a class outside the contract
    hierarchy) are held to the same rule and wrapped on ``cls``. Protocols that extend a
    contract are contracts themselves and are left as they are.
    """
    if _is_contract(cls):
        return
    _check_override_markers(cls)
    _check_mixin_override_markers(cls)
    state = _settings()
    state.classes.add(cls)
    _apply(cls, state)


def checked(obj: _T, contract: type[object]) -> _T:
    """Give ``obj``, a structural implementer of ``contract``, the call checks of a subclass.

    Returns a proxy that checks every contract method call and forwards everything else
    (optional methods ``obj`` lacks run the contract's default), or ``obj`` itself while
    checks are off.
    """
    if not _is_contract(contract):
        raise TypeError(
            f"checked() takes a kvcontract contract such as OffloadingManager, got {contract!r}"
        )
    required = getattr(contract, "__abstractmethods__", frozenset[str]())
    missing = sorted(name for name in required if not callable(getattr(obj, name, None)))
    if missing:
        raise ContractDefinitionError(
            f"{type(obj).__name__} does not implement {contract.__name__}: "
            f"missing {', '.join(missing)}"
        )
    state = _settings()
    if not state.checks:
        return obj
    proxy = _proxy_type(contract, state.full)(obj)
    return cast(_T, proxy)  # the proxy forwards every attribute to obj, so it stands for obj


def unchecked(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """``method``, a bound contract method, without its call checks; anything else as it is.

    For a caller whose calls the strict type-check gate already proves, on a hot path:
    kvcontract's managers calling their own policy. The calls an engine makes into a
    manager stay checked.
    """
    function = getattr(method, "__func__", method)
    original = getattr(function, _ORIGINAL_ATTRIBUTE, None)
    if original is None:
        return method
    owner = getattr(method, "__self__", None)
    # the original is the function the checked wrapper was built from: same signature
    if owner is None:
        return cast(Callable[_P, _R], original)  # a staticmethod's function, called as it is
    return cast(Callable[_P, _R], types.MethodType(original, owner))


def _is_contract(cls: type) -> bool:
    return (
        cls is not Contract
        and Contract in getattr(cls, "__mro__", ())
        and bool(cls.__dict__.get("_is_protocol", False))
    )


def _contract_methods(cls: type) -> dict[str, Callable[..., object]]:
    """Contract methods visible from ``cls``, each from the most derived contract defining it."""
    methods: dict[str, Callable[..., object]] = {}
    for base in cls.__mro__:
        if not _is_contract(base):
            continue
        for name, member in base.__dict__.items():
            if (
                isinstance(member, types.FunctionType)
                and member.__qualname__ == f"{base.__qualname__}.{name}"
                and _is_public_method(name)
            ):
                methods.setdefault(name, member)
    return methods


def _is_public_method(name: str) -> bool:
    return not name.startswith("_") or (name.endswith("__") and name != "__init_subclass__")


def _apply(cls: type, state: _State) -> None:
    """Put ``cls``'s methods in the state ``state`` asks for: originals, or checked wrappers."""
    for name, member in list(cls.__dict__.items()):
        if getattr(member, _FROM_MIXIN_ATTRIBUTE, False):
            delattr(cls, name)
        elif (original := getattr(member, _ORIGINAL_ATTRIBUTE, None)) is not None:
            setattr(cls, name, original)
    if not state.checks:
        return
    for name, contract_fn in _contract_methods(cls).items():
        if name in cls.__dict__:
            setattr(cls, name, _wrap(cls, name, cls.__dict__[name], contract_fn, state.full))
        elif (provided := _from_mixin(cls, name)) is not None:
            wrapper = _wrap(cls, name, provided[1], contract_fn, state.full)
            setattr(wrapper, _FROM_MIXIN_ATTRIBUTE, True)
            setattr(cls, name, wrapper)


def _from_mixin(cls: type, name: str) -> tuple[type, object] | None:
    """The plain mixin (outside the contract hierarchy) that gives ``cls`` its ``name``, if one does.

    Wrappers that enforcement itself put on classes are looked through, so the answer does
    not depend on whether checks are on.
    """
    for base in cls.__mro__[1:]:
        member = base.__dict__.get(name)
        if member is None or getattr(member, _FROM_MIXIN_ATTRIBUTE, False):
            continue
        if Contract in base.__mro__ or base.__module__ in _MACHINERY_MODULES | {"builtins"}:
            return None  # a contract (checked itself), or Python's own classes
        return (base, member) if _is_method_like(member) else None
    return None


def _check_override_markers(cls: type) -> None:
    problems: list[str] = []
    for name, member in cls.__dict__.items():
        if (
            name in _EXEMPT_FROM_OVERRIDE
            or _is_mangled(name)
            or not _is_method_like(member)
            or getattr(member, "__module__", None) in _MACHINERY_MODULES
            or getattr(member, _FROM_MIXIN_ATTRIBUTE, False)
            or _is_synthesized(member)
        ):
            continue
        base = next((b for b in cls.__mro__[1:] if name in b.__dict__), None)
        if base is not None and not _has_override_marker(member):
            problems.append(f"{name} (overrides {base.__module__}.{base.__qualname__}.{name})")
    _raise_for(cls, problems, "")


def _check_mixin_override_markers(cls: type) -> None:
    """Contract methods that ``cls`` takes from a plain mixin need ``@override`` as its own do.

    A type checker sees only the mixin, which defines the method without a base, so neither
    pyright nor mypy can ask for the marker: the class that combines the two is where the
    override happens.
    """
    problems: list[str] = []
    for name in _contract_methods(cls):
        if name in cls.__dict__ or name in _EXEMPT_FROM_OVERRIDE:
            continue
        provided = _from_mixin(cls, name)
        if provided is None or _has_override_marker(provided[1]):
            continue
        mixin = provided[0]
        later = cls.__mro__[cls.__mro__.index(mixin) + 1 :]
        base = next(b for b in later if name in b.__dict__)
        problems.append(
            f"{name} (from mixin {mixin.__module__}.{mixin.__qualname__}, "
            f"overrides {base.__module__}.{base.__qualname__}.{name})"
        )
    _raise_for(
        cls,
        problems,
        " A mixin that implements a contract method should inherit the contract, so type "
        "checkers see the base its @override refers to.",
    )


def _raise_for(cls: type, problems: list[str], advice: str) -> None:
    if problems:
        raise ContractDefinitionError(
            f"{cls.__module__}.{cls.__qualname__} overrides without @override: "
            f"{'; '.join(problems)}. Decorate each with "
            f"@override (from typing_extensions import override).{advice}"
        )


def _is_synthesized(member: object) -> bool:
    """Made at run time, not written by the class's author: ``dataclass(slots=True)`` and attrs
    generate ``__repr__``, ``__eq__``... from source strings (as pyright, we do not ask them
    for ``@override``)."""
    function: object = getattr(member, "__func__", member)
    seen: set[int] = set()
    while (inner := getattr(function, "__wrapped__", None)) is not None and id(inner) not in seen:
        seen.add(id(inner))
        function = inner  # dataclass wraps its generated __repr__ with recursive_repr
    code = getattr(function, "__code__", None)
    return code is not None and str(getattr(code, "co_filename", "")).startswith("<")


def _is_mangled(name: str) -> bool:
    return name.startswith("__") and not name.endswith("__")


def _is_method_like(member: object) -> bool:
    if isinstance(member, type):
        return False
    return callable(member) or isinstance(member, (classmethod, staticmethod, property)) or (
        hasattr(member, "__get__") and hasattr(member, "func")
    )


def _has_override_marker(member: object) -> bool:
    seen: set[int] = set()
    pending: list[object] = [member]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if getattr(current, "__override__", False) is True:
            return True
        pending.extend(
            inner
            for attribute in _WRAPPER_ATTRIBUTES
            if (inner := getattr(current, attribute, None)) is not None
        )
    return False


def _wrap(
    cls: type, name: str, impl: object, contract_fn: Callable[..., object], full: bool
) -> object:
    """``impl``, as found in a class body, checked against ``contract_fn``'s signature.

    A ``staticmethod`` or ``classmethod`` stays one: its function is checked (a static one
    against the contract's parameters after ``self``) and wrapped again, so a call binds
    exactly as it does with checks off.
    """
    params = list(inspect.signature(contract_fn).parameters.values())
    kind = type(impl)
    if kind is not staticmethod and kind is not classmethod:
        return _checked_function(cls, name, impl, contract_fn, params, full)
    inner: object = getattr(impl, "__func__")
    if kind is staticmethod:
        wrapper: object = staticmethod(
            _checked_function(cls, name, inner, contract_fn, params[1:], full)
        )
    else:
        wrapper = classmethod(_checked_function(cls, name, inner, contract_fn, params, full))
    vars(wrapper).update(getattr(impl, "__dict__", {}))
    setattr(wrapper, _ORIGINAL_ATTRIBUTE, impl)
    return wrapper


def _checked_function(
    cls: type,
    name: str,
    impl: object,
    contract_fn: Callable[..., object],
    params: list[inspect.Parameter],
    full: bool,
) -> Callable[..., object]:
    """``impl`` checked by beartype against ``params``, with a fast path in front where it can.

    Beartype's wrapper raises kvcontract's own violation types, which word the message and
    keep beartype's exception as ``__cause__``. In the sampled mode a generated function
    first tests the common exact types itself and calls ``impl`` directly; anything it is
    unsure of goes to the beartype wrapper, which decides and words the error.
    """
    hints = get_type_hints(contract_fn)
    if isinstance(impl, types.FunctionType) and impl.__code__.co_argcount >= len(params):
        impl_names = impl.__code__.co_varnames[: len(params)]
        target = _function_copy(impl)
    else:
        impl_names = tuple(p.name for p in params)
        target = _forwarding_function(name, params, impl)
    shown = {
        impl_name: hints[param.name]
        for impl_name, param in zip(impl_names, params)
        if param.name in hints
    }
    if "return" in hints:
        shown["return"] = hints["return"]
    adapt = _full_hint if full else _fast_hint
    target.__annotations__ = {param: adapt(hint) for param, hint in shown.items()}
    where = _CallSite(f"{contract_fn.__qualname__}()", f"{cls.__qualname__}.{name}", shown)
    conf = BeartypeConf(
        strategy=BeartypeStrategy.On if full else BeartypeStrategy.O1,
        is_random=False,  # O(1) samples the first element, as the fast path does: both agree
        violation_param_type=type("ContractViolation", (_ParamViolation,), {"site": where}),
        violation_return_type=type("ContractViolation", (_ReturnViolation,), {"site": where}),
    )
    checker: Callable[..., object] = beartype(conf=conf)(target)
    outer = checker if full else _fast_path(name, target, impl, checker, shown, conf)
    outer.__dict__.update(getattr(impl, "__dict__", {}))
    outer.__name__ = name
    outer.__qualname__ = f"{cls.__qualname__}.{name}"
    outer.__doc__ = getattr(impl, "__doc__", None)
    setattr(outer, "__wrapped__", impl)
    setattr(outer, _ORIGINAL_ATTRIBUTE, impl)
    return outer


def _fast_path(
    name: str,
    target: types.FunctionType,
    impl: object,
    checker: Callable[..., object],
    shown: Mapping[str, object],
    conf: BeartypeConf,
) -> Callable[..., object]:
    """A function with ``target``'s parameters that calls ``impl`` when exact tests pass.

    The tests accept only what beartype accepts too (exact containers, one sampled
    element each, ``isinstance`` against plain classes); any other value, and any hint they
    cannot express, goes to ``checker``. Beartype's own wrapper packs ``*args``/``**kwargs``
    and draws a random number per call: measured with tools/bench_enforce.py it adds about
    0.9 us per call where this adds about 0.1-0.2 us.
    """
    code = target.__code__
    names = code.co_varnames[: code.co_argcount]
    if (
        code.co_kwonlyargcount
        or code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)
        or target.__kwdefaults__
    ):
        return checker
    namespace: dict[str, object] = {"_kvcontract_impl": impl, "_kvcontract_checked": checker}
    tests: list[str] = []
    for param in names:
        if param in shown:
            test = _fast_test(shown[param], param, namespace)
            if test is None:
                return checker
            tests.append(test)
    returned = "_kvcontract_result"
    return_test = "True"
    if "return" in shown:
        found = _fast_test(shown["return"], returned, namespace)
        if found is None:
            return checker
        return_test = found
        namespace["_kvcontract_returned"] = _return_checker(shown["return"], conf)
    arguments = ", ".join(names)
    source = (
        f"def {name}({arguments}):\n"
        f"    if {' and '.join(tests) or 'True'}:\n"
        f"        {returned} = _kvcontract_impl({arguments})\n"
        f"        if {return_test}:\n"
        f"            return {returned}\n"
        f"        return _kvcontract_returned({returned})\n"
        f"    return _kvcontract_checked({arguments})\n"
    )
    exec(source, namespace)  # noqa: S102  # the names come from a code object, the tests from _fast_test
    function = namespace[name]
    assert isinstance(function, types.FunctionType)
    function.__defaults__ = target.__defaults__
    return function


def _return_checker(hint: object, conf: BeartypeConf) -> Callable[[object], object]:
    """A beartype-checked identity for a return value the fast path could not vouch for."""

    def returned(value: object) -> object:
        return value

    returned.__annotations__ = {"return": hint}
    return beartype(conf=conf)(returned)


_is_bearable = cast(Callable[[object, object], bool], is_bearable)
"""beartype's ``is_bearable`` for hints built at run time, which no checker can see as type forms."""

_SEQUENCES: frozenset[object] = frozenset({abc.Sequence, abc.Iterable, abc.Collection})


def _fast_test(hint: object, pith: str, namespace: dict[str, object]) -> str | None:
    """A Python expression true only if ``pith`` satisfies ``hint``, or ``None`` where no
    such cheap test exists.

    A sequence's sample is its first element, as beartype's O(1) strategy with
    ``is_random=False`` takes it, so both paths judge a call alike: a random index costs a
    call per argument, which tools/bench_enforce.py measured at 70-110 ns, a third of the
    0.35 us budget.
    """
    if hint is None or hint is type(None):
        return f"{pith} is None"
    supertype = getattr(hint, "__supertype__", None)
    if supertype is not None:
        return _fast_test(supertype, pith, namespace)  # a NewType is checked as its supertype
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        # None first: "is None" is the cheapest test and the most common optional answer
        ordered = sorted(args, key=lambda arg: arg is not type(None))
        parts = _fast_tests([(arg, pith) for arg in ordered], namespace)
        return None if parts is None else "(" + " or ".join(parts) + ")"
    if origin in _SEQUENCES and len(args) == 1:
        is_list = f"(type({pith}) is list or type({pith}) is tuple)"
        if origin is not abc.Sequence:
            return is_list  # beartype checks no element of an Iterable or Collection either
        item = _fast_test(args[0], f"{pith}[0]", namespace)
        return None if item is None else f"({is_list} and (not {pith} or {item}))"
    if origin is abc.Set and len(args) == 1:
        return f"(type({pith}) is frozenset or type({pith}) is set)"
    if origin is list and len(args) == 1:
        item = _fast_test(args[0], f"{pith}[0]", namespace)
        return None if item is None else f"(type({pith}) is list and (not {pith} or {item}))"
    if origin is tuple and args and args[-1] is not Ellipsis:
        items = _fast_tests([(arg, f"{pith}[{i}]") for i, arg in enumerate(args)], namespace)
        if items is None:
            return None
        return "(" + " and ".join([f"type({pith}) is tuple", f"len({pith}) == {len(args)}", *items]) + ")"
    if (
        origin is None
        and isinstance(hint, type)
        and type(hint).__instancecheck__ is type.__instancecheck__
    ):
        key = f"_kvcontract_type_{len(namespace)}"
        namespace[key] = hint
        return f"isinstance({pith}, {key})"
    return None


def _fast_tests(
    cases: list[tuple[object, str]], namespace: dict[str, object]
) -> list[str] | None:
    """The fast test of each ``(hint, pith)``, or ``None`` if one of them has none."""
    tests: list[str] = []
    for hint, pith in cases:
        test = _fast_test(hint, pith, namespace)
        if test is None:
            return None
        tests.append(test)
    return tests


def _fast_hint(hint: object) -> object:
    """``hint`` with the common concrete containers tried first.

    ``isinstance`` against an ABC such as ``Sequence`` costs several times a check against
    ``list``; the union accepts exactly what ``hint`` accepts, but answers lists and tuples
    (or sets, for ``Set``) on the fast path.
    """
    origin = get_origin(hint)
    args = get_args(hint)
    if origin in _SEQUENCES and len(args) == 1:
        item = args[0]
        return Union[list[item], tuple[item, ...], hint]  # type: ignore[valid-type]  # built at run time from a contract hint
    if origin is abc.Set and len(args) == 1:
        item = args[0]
        return Union[frozenset[item], set[item], hint]  # type: ignore[valid-type]  # built at run time from a contract hint
    return hint


_CONTAINERS: frozenset[object] = frozenset(
    {list, set, frozenset, abc.Sequence, abc.Iterable, abc.Collection, abc.Set}
)


def _full_hint(hint: object) -> object:
    """``hint`` with every container checked element by element.

    Beartype 0.23 accepts ``BeartypeStrategy.On`` but still samples one element (its docs
    call the linear strategy "currently unimplemented"), so each container hint gets a
    validator that checks all of its elements; one-shot iterators are left unread.
    """
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        return Union[tuple(_full_hint(arg) for arg in args)]
    if origin in _CONTAINERS and len(args) == 1:
        return Annotated[hint, Is[_every(_full_hint(args[0]))]]
    if origin is tuple and args:
        if args[-1] is Ellipsis:
            return Annotated[hint, Is[_every(_full_hint(args[0]))]]
        return tuple[tuple(_full_hint(arg) for arg in args)]  # type: ignore[misc]  # built at run time from a contract hint
    return hint


def _every(item: object) -> Callable[[object], bool]:
    """A validator: every element of a re-iterable container satisfies ``item``.

    Keys are the common case, and ``isinstance`` in a generator checks one in about 50 ns
    where ``is_bearable`` takes about 1 us, so a plain class (or a NewType of one) gets it.
    """
    while (supertype := getattr(item, "__supertype__", None)) is not None:
        item = supertype
    kind = item if isinstance(item, type) and get_origin(item) is None else None

    def every(values: Any) -> bool:
        if isinstance(values, Iterator):
            return True  # reading a one-shot iterator would consume what the callee needs
        if kind is not None:
            return all(isinstance(value, kind) for value in values)
        return all(_is_bearable(value, item) for value in values)

    return every


def _function_copy(impl: types.FunctionType) -> types.FunctionType:
    """A twin of ``impl`` sharing its code, so annotations can change without touching it."""
    twin = types.FunctionType(
        impl.__code__, impl.__globals__, impl.__name__, impl.__defaults__, impl.__closure__
    )
    twin.__kwdefaults__ = impl.__kwdefaults__
    twin.__qualname__ = impl.__qualname__
    twin.__module__ = impl.__module__
    return twin


def _forwarding_function(
    name: str, params: list[inspect.Parameter], impl: object
) -> types.FunctionType:
    """A function with the contract's parameters that calls ``impl``: for decorated methods."""
    plain = [p.replace(annotation=inspect.Parameter.empty) for p in params]
    signature = inspect.Signature(plain)
    call = ", ".join(
        p.name if p.kind is not inspect.Parameter.KEYWORD_ONLY else f"{p.name}={p.name}"
        for p in params
    )
    namespace: dict[str, object] = {"_impl": impl}
    defaults = {f"_default_{p.name}": p.default for p in params if p.default is not p.empty}
    namespace.update(defaults)
    rendered = ", ".join(
        str(p.replace(default=inspect.Parameter.empty))
        + (f"=_default_{p.name}" if p.default is not p.empty else "")
        for p in signature.parameters.values()
    )
    exec(f"def {name}({rendered}):\n    return _impl({call})\n", namespace)  # noqa: S102
    function = namespace[name]
    assert isinstance(function, types.FunctionType)
    return function


def _short_type_name(hint: object) -> str:
    text = hint.__name__ if isinstance(hint, type) else repr(hint)
    return re.sub(r"\b(?:[A-Za-z_]\w*\.)+([A-Za-z_]\w*)", r"\1", text)


def _received_name(value: object) -> str:
    kind = type(value)
    if isinstance(value, types.GeneratorType):
        return "generator"
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"


def _received(value: object, hint: object) -> str:
    """What a caller passed, naming the first element that broke ``hint`` if it is a container.

    Runs only for a violation, so reading a re-iterable container through costs nothing on
    calls that pass.
    """
    name = _received_name(value)
    union = get_origin(hint) in (Union, types.UnionType)
    for container in get_args(hint) if union else (hint,):
        args = get_args(container)
        if (
            len(args) != 1
            or isinstance(value, (str, bytes))
            or not _is_bearable(value, get_origin(container))
            or not _is_bearable(value, abc.Collection)
        ):
            continue
        for index, element in enumerate(cast(abc.Collection[object], value)):
            if not _is_bearable(element, args[0]):
                if isinstance(value, abc.Sequence):
                    return f"{name} whose element {index} is {_received_name(element)}"
                return f"{name} holding a {_received_name(element)}"
    return name


@dataclass(frozen=True)
class _CallSite:
    """The contract method a wrapper checks, who implements it, and the hints it checks."""

    contract_method: str
    implementer: str
    annotations: Mapping[str, object]


class _ParamViolation(ContractViolation):
    """Raised by beartype for a bad argument: rewords its message, keeps it as the cause."""

    site: ClassVar[_CallSite]

    def __init__(self, message: str, culprits: tuple[object, ...] = ()) -> None:
        _count_violation()
        value = culprits[0] if culprits else None
        found = _PARAMETER_IN_MESSAGE.search(message)
        name = found.group(1) if found else "?"
        expected = _short_type_name(self.site.annotations.get(name, object))
        super().__init__(
            f"{self.site.contract_method} called on {self.site.implementer}: parameter "
            f"{name!r} expects {expected}, "
            f"received {_received(value, self.site.annotations.get(name, object))}. "
            f"Fix: {_fix_for(expected, value)}"
        )
        self.__cause__ = BeartypeCallHintParamViolation(message=message, culprits=culprits)


class _ReturnViolation(ContractViolation):
    """Raised by beartype for a bad return value: rewords its message, keeps it as the cause."""

    site: ClassVar[_CallSite]

    def __init__(self, message: str, culprits: tuple[object, ...] = ()) -> None:
        _count_violation()
        hint = self.site.annotations["return"]
        received = _received(culprits[0], hint) if culprits else "a value of another type"
        expected = _short_type_name(self.site.annotations["return"])
        super().__init__(
            f"{self.site.contract_method} implemented by {self.site.implementer} returned "
            f"{received}, expected {expected}. Fix: return what the contract declares."
        )
        self.__cause__ = BeartypeCallHintReturnViolation(message=message, culprits=culprits)


_PARAMETER_IN_MESSAGE = re.compile(r"parameter (\w+)=")


def _fix_for(expected: str, value: object) -> str:
    if expected.startswith("Sequence") and isinstance(value, _ONE_SHOT_OR_UNORDERED):
        return (
            "pass a list or tuple (for example list(...) at the call site): the contract "
            "types it as a Sequence because implementations may take len(), index it or "
            "iterate it twice."
        )
    return f"pass a value of type {expected}."


_ONE_SHOT_OR_UNORDERED: tuple[type[object], ...] = (Iterator, Set, KeysView, ValuesView)
"""What callers pass by mistake where a Sequence is due: one-shot iterators, sets, dict views."""


_proxy_types: dict[tuple[type, bool], type] = {}


def _proxy_type(contract: type, full: bool) -> type:
    """A class whose instances forward to a target and check the contract's methods."""
    known = _proxy_types.get((contract, full))
    if known is not None:
        return known
    namespace: dict[str, object] = {
        "__slots__": ("_kvcontract_target",),
        "__init__": _proxy_init,
        "__getattr__": _proxy_getattr,
        "__repr__": _proxy_repr,
    }
    proxy = type(f"Checked{contract.__name__}", (), namespace)
    for name, contract_fn in _contract_methods(contract).items():
        forward = _forward_to_target(name, contract_fn)
        setattr(proxy, name, _wrap(proxy, name, forward, contract_fn, full))
    _proxy_types[(contract, full)] = proxy
    return proxy


def _forward_to_target(name: str, default: Callable[..., object]) -> Callable[..., object]:
    """Calls the target's method, or the contract's default body where the target has none."""

    def forward(self: Any, *args: Any, **kwargs: Any) -> object:
        method = getattr(self._kvcontract_target, name, None)
        if method is None:
            return default(self, *args, **kwargs)
        return method(*args, **kwargs)

    forward.__name__ = name
    return forward


def _proxy_init(self: Any, target: object) -> None:
    self._kvcontract_target = target


def _proxy_getattr(self: Any, name: str) -> object:
    return getattr(self._kvcontract_target, name)


def _proxy_repr(self: Any) -> str:
    return f"checked({self._kvcontract_target!r})"
