"""Runtime enforcement of the contracts: ``@override`` at class creation, beartype call checks.

Every class that inherits a contract is processed by :func:`enforce_class` when it is
created. Its overrides must carry ``@override``, and the contract methods it implements
are wrapped so that each call is checked against the contract's own signature.
``KVCONTRACT_CHECKS=off`` or ``configure(checks=False)`` removes the wrappers.
"""

from __future__ import annotations

import inspect
import os
import re
import types
import weakref
from collections import abc
from collections.abc import Callable, Iterator, KeysView, Mapping, Set, ValuesView
from dataclasses import dataclass
from typing import (
    Any,
    ClassVar,
    ParamSpec,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

from beartype import BeartypeConf, beartype
from beartype.roar import BeartypeCallHintParamViolation, BeartypeCallHintReturnViolation

from kvcontract.contracts.base import Contract

__all__ = [
    "ContractDefinitionError",
    "ContractViolation",
    "checked",
    "checks_enabled",
    "configure",
    "enforce_class",
    "unchecked",
]

_T = TypeVar("_T")
_P = ParamSpec("_P")
_R = TypeVar("_R")

ENV_VAR = "KVCONTRACT_CHECKS"
"""Environment variable read at import: ``off`` disables the call checks, ``on`` (default) enables them."""

_EXEMPT_FROM_OVERRIDE = frozenset({"__init__", "__new__", "__init_subclass__", "__post_init__"})
_MACHINERY_MODULES = frozenset({"typing", "typing_extensions", "abc"})
"""Modules whose functions are planted on classes by the runtime (``__subclasshook__``...)."""
_WRAPPER_ATTRIBUTES = ("__func__", "fget", "fset", "fdel", "func", "__wrapped__")
_ORIGINAL_ATTRIBUTE = "__kvcontract_original__"


class ContractDefinitionError(TypeError):
    """A class breaks a contract's definition rules (an override without ``@override``...)."""


class ContractViolation(TypeError):
    """A call of a contract method passed or returned a value its contract does not allow."""


def _checks_from_environment() -> bool:
    value = os.environ.get(ENV_VAR, "on").strip().lower()
    if value in {"on", "1", "true", "yes"}:
        return True
    if value in {"off", "0", "false", "no"}:
        return False
    raise ValueError(f"{ENV_VAR}={value!r} is not understood: set it to 'on' or 'off'")


@dataclass
class _State:
    checks: bool
    classes: weakref.WeakSet[type]


_state = _State(checks=_checks_from_environment(), classes=weakref.WeakSet())


def checks_enabled() -> bool:
    """Whether contract calls are checked now."""
    return _state.checks


def configure(*, checks: bool) -> None:
    """Switch the call checks on or off for every contract class, existing and future.

    Off restores the original methods, so an unchecked call costs nothing extra.
    """
    if checks == _state.checks:
        return
    _state.checks = checks
    for cls in list(_state.classes):
        for name, contract_fn in _implemented_contract_methods(cls).items():
            original = _unwrapped(cls.__dict__[name])
            setattr(cls, name, _wrap(cls, name, original, contract_fn) if checks else original)


def enforce_class(cls: type) -> None:
    """Check ``cls``'s overrides for ``@override`` and wrap its contract methods with call checks.

    Protocols that extend a contract are contracts themselves and are left as they are.
    """
    if _is_contract(cls):
        return
    _check_override_markers(cls)
    _state.classes.add(cls)
    if _state.checks:
        for name, contract_fn in _implemented_contract_methods(cls).items():
            setattr(cls, name, _wrap(cls, name, _unwrapped(cls.__dict__[name]), contract_fn))


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
    if not _state.checks:
        return obj
    proxy = _proxy_type(contract)(obj)
    return cast(_T, proxy)  # the proxy forwards every attribute to obj, so it stands for obj


def unchecked(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """``method``, a bound contract method, without its call checks; anything else as it is.

    For a caller whose calls the strict type-check gate already proves, on a hot path:
    kvcontract's managers calling their own policy. The calls an engine makes into a
    manager stay checked.
    """
    original = getattr(getattr(method, "__func__", None), _ORIGINAL_ATTRIBUTE, None)
    owner = getattr(method, "__self__", None)
    if original is None or owner is None:
        return method
    # the original is the function the checked wrapper was built from: same signature
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


def _implemented_contract_methods(cls: type) -> dict[str, Callable[..., object]]:
    return {
        name: fn for name, fn in _contract_methods(cls).items() if name in cls.__dict__
    }


def _check_override_markers(cls: type) -> None:
    problems: list[str] = []
    for name, member in cls.__dict__.items():
        if (
            name in _EXEMPT_FROM_OVERRIDE
            or _is_mangled(name)
            or not _is_method_like(member)
            or getattr(member, "__module__", None) in _MACHINERY_MODULES
            or _is_synthesized(member)
        ):
            continue
        base = next((b for b in cls.__mro__[1:] if name in b.__dict__), None)
        if base is not None and not _has_override_marker(member):
            problems.append(f"{name} (overrides {base.__module__}.{base.__qualname__}.{name})")
    if problems:
        raise ContractDefinitionError(
            f"{cls.__module__}.{cls.__qualname__} overrides without @override: "
            f"{'; '.join(problems)}. Decorate each with "
            "@override (from typing_extensions import override)."
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


def _unwrapped(member: object) -> object:
    return getattr(member, _ORIGINAL_ATTRIBUTE, member)


def _wrap(
    cls: type, name: str, impl: object, contract_fn: Callable[..., object]
) -> Callable[..., object]:
    """``impl`` checked by beartype against ``contract_fn``'s signature.

    The beartype wrapper is the only frame added: it raises kvcontract's own violation
    types, which word the message and keep beartype's exception as ``__cause__``.
    """
    hints = get_type_hints(contract_fn)
    contract_params = list(inspect.signature(contract_fn).parameters.values())
    if isinstance(impl, types.FunctionType) and impl.__code__.co_argcount >= len(contract_params):
        impl_names = impl.__code__.co_varnames[: len(contract_params)]
        target = _function_copy(impl)
    else:
        impl_names = tuple(p.name for p in contract_params)
        target = _forwarding_function(name, contract_params, impl)
    shown = {
        impl_name: hints[param.name]
        for impl_name, param in zip(impl_names, contract_params)
        if param.name in hints
    }
    if "return" in hints:
        shown["return"] = hints["return"]
    target.__annotations__ = {param: _fast_hint(hint) for param, hint in shown.items()}
    where = _CallSite(f"{contract_fn.__qualname__}()", f"{cls.__qualname__}.{name}", shown)
    conf = BeartypeConf(
        violation_param_type=type("ContractViolation", (_ParamViolation,), {"site": where}),
        violation_return_type=type("ContractViolation", (_ReturnViolation,), {"site": where}),
    )
    checker = beartype(conf=conf)(target)
    checker.__dict__.update(getattr(impl, "__dict__", {}))
    checker.__name__ = name
    checker.__qualname__ = f"{cls.__qualname__}.{name}"
    checker.__doc__ = getattr(impl, "__doc__", None)
    setattr(checker, "__wrapped__", impl)
    setattr(checker, _ORIGINAL_ATTRIBUTE, impl)
    return checker


def _fast_hint(hint: object) -> object:
    """``hint`` with the common concrete containers tried first.

    ``isinstance`` against an ABC such as ``Sequence`` costs several times a check against
    ``list``; the union accepts exactly what ``hint`` accepts, but answers lists and tuples
    (or sets, for ``Set``) on the fast path.
    """
    origin = get_origin(hint)
    args = get_args(hint)
    if origin in (abc.Sequence, abc.Iterable, abc.Collection) and len(args) == 1:
        item = args[0]
        return Union[list[item], tuple[item, ...], hint]  # type: ignore[valid-type]  # built at run time from a contract hint
    if origin is abc.Set and len(args) == 1:
        item = args[0]
        return Union[frozenset[item], set[item], hint]  # type: ignore[valid-type]  # built at run time from a contract hint
    return hint


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
        value = culprits[0] if culprits else None
        found = _PARAMETER_IN_MESSAGE.search(message)
        name = found.group(1) if found else "?"
        expected = _short_type_name(self.site.annotations.get(name, object))
        super().__init__(
            f"{self.site.contract_method} called on {self.site.implementer}: parameter "
            f"{name!r} expects {expected}, received {_received_name(value)}. "
            f"Fix: {_fix_for(expected, value)}"
        )
        self.__cause__ = BeartypeCallHintParamViolation(message=message, culprits=culprits)


class _ReturnViolation(ContractViolation):
    """Raised by beartype for a bad return value: rewords its message, keeps it as the cause."""

    site: ClassVar[_CallSite]

    def __init__(self, message: str, culprits: tuple[object, ...] = ()) -> None:
        received = _received_name(culprits[0]) if culprits else "a value of another type"
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


_proxy_types: dict[type, type] = {}


def _proxy_type(contract: type) -> type:
    """A class whose instances forward to a target and check the contract's methods."""
    known = _proxy_types.get(contract)
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
        setattr(proxy, name, _wrap(proxy, name, forward, contract_fn))
    _proxy_types[contract] = proxy
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
