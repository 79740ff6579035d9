"""The call checks: each contract method wrapped with beartype, a generated fast path in front.

The wrapper checks the contract's own signature, whatever the implementer annotated. In the
sampled mode a generated function first tests the common exact types itself and calls the
implementation directly; anything it is unsure of goes to beartype, whose violations are
kvcontract's own types (:mod:`.errors`).
"""

from __future__ import annotations

import inspect
import types
from collections import abc
from collections.abc import Callable, Iterator, Mapping
from typing import Annotated, Any, ParamSpec, TypeVar, Union, cast, get_args, get_origin, get_type_hints

from beartype import BeartypeConf, BeartypeStrategy, beartype
from beartype.vale import Is

from kvcontract.contracts.enforcement.errors import (
    PUBLIC_MODULE,
    CallSite,
    ParamViolation,
    ReturnViolation,
    is_bearable,
)

__all__ = ["ORIGINAL_ATTRIBUTE", "unchecked", "wrap"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

ORIGINAL_ATTRIBUTE = "__kvcontract_original__"
"""Holds, on a checked wrapper, the method it was built from."""


def unchecked(method: Callable[_P, _R]) -> Callable[_P, _R]:
    """``method``, a bound contract method, without its call checks; anything else as it is.

    For a caller whose calls the strict type-check gate already proves, on a hot path:
    kvcontract's managers calling their own policy. The calls an engine makes into a
    manager stay checked.
    """
    function = getattr(method, "__func__", method)
    original = getattr(function, ORIGINAL_ATTRIBUTE, None)
    if original is None:
        return method
    owner = getattr(method, "__self__", None)
    # the original is the function the checked wrapper was built from: same signature
    if owner is None:
        return cast(Callable[_P, _R], original)  # a staticmethod's function, called as it is
    return cast(Callable[_P, _R], types.MethodType(original, owner))


def wrap(cls: type, name: str, impl: object, contract_fn: Callable[..., object], full: bool) -> object:
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
        wrapper: object = staticmethod(_checked_function(cls, name, inner, contract_fn, params[1:], full))
    else:
        wrapper = classmethod(_checked_function(cls, name, inner, contract_fn, params, full))
    vars(wrapper).update(getattr(impl, "__dict__", {}))
    setattr(wrapper, ORIGINAL_ATTRIBUTE, impl)
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
    shown = {impl_name: hints[param.name] for impl_name, param in zip(impl_names, params) if param.name in hints}
    if "return" in hints:
        shown["return"] = hints["return"]
    adapt = _full_hint if full else _fast_hint
    target.__annotations__ = {param: adapt(hint) for param, hint in shown.items()}
    where = CallSite(f"{contract_fn.__qualname__}()", f"{cls.__qualname__}.{name}", shown)
    violation = {"site": where, "__module__": PUBLIC_MODULE}
    conf = BeartypeConf(
        strategy=BeartypeStrategy.On if full else BeartypeStrategy.O1,
        is_random=False,  # O(1) samples the first element, as the fast path does: both agree
        violation_param_type=type("ContractViolation", (ParamViolation,), violation),
        violation_return_type=type("ContractViolation", (ReturnViolation,), violation),
    )
    checker: Callable[..., object] = beartype(conf=conf)(target)
    outer = checker if full else _fast_path(name, target, impl, checker, shown, conf)
    outer.__dict__.update(getattr(impl, "__dict__", {}))
    outer.__name__ = name
    outer.__qualname__ = f"{cls.__qualname__}.{name}"
    outer.__doc__ = getattr(impl, "__doc__", None)
    setattr(outer, "__wrapped__", impl)
    setattr(outer, ORIGINAL_ATTRIBUTE, impl)
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
    if code.co_kwonlyargcount or code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) or target.__kwdefaults__:
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
    exec(source, namespace)  # the names come from a code object, the tests from _fast_test
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
    if origin is None and isinstance(hint, type) and type(hint).__instancecheck__ is type.__instancecheck__:
        key = f"_kvcontract_type_{len(namespace)}"
        namespace[key] = hint
        return f"isinstance({pith}, {key})"
    return None


def _fast_tests(cases: list[tuple[object, str]], namespace: dict[str, object]) -> list[str] | None:
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
        return Union[list[item], tuple[item, ...], hint]  # type: ignore[valid-type]  # noqa: UP007  # built at run time from a contract hint, which `|` may refuse (a string, a ForwardRef)
    if origin is abc.Set and len(args) == 1:
        item = args[0]
        return Union[frozenset[item], set[item], hint]  # type: ignore[valid-type]  # noqa: UP007  # built at run time from a contract hint, which `|` may refuse
    return hint


_CONTAINERS: frozenset[object] = frozenset({list, set, frozenset, abc.Sequence, abc.Iterable, abc.Collection, abc.Set})


def _full_hint(hint: object) -> object:
    """``hint`` with every container checked element by element.

    Beartype 0.23 accepts ``BeartypeStrategy.On`` but still samples one element (its docs
    call the linear strategy "currently unimplemented"), so each container hint gets a
    validator that checks all of its elements; one-shot iterators are left unread.
    """
    origin, args = get_origin(hint), get_args(hint)
    if origin in (Union, types.UnionType):
        return Union[tuple(_full_hint(arg) for arg in args)]  # noqa: UP007  # a union of any number of hints, built at run time
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
        return all(is_bearable(value, item) for value in values)

    return every


def _function_copy(impl: types.FunctionType) -> types.FunctionType:
    """A twin of ``impl`` sharing its code, so annotations can change without touching it."""
    twin = types.FunctionType(impl.__code__, impl.__globals__, impl.__name__, impl.__defaults__, impl.__closure__)
    twin.__kwdefaults__ = impl.__kwdefaults__
    twin.__qualname__ = impl.__qualname__
    twin.__module__ = impl.__module__
    return twin


def _forwarding_function(name: str, params: list[inspect.Parameter], impl: object) -> types.FunctionType:
    """A function with the contract's parameters that calls ``impl``: for decorated methods."""
    plain = [p.replace(annotation=inspect.Parameter.empty) for p in params]
    signature = inspect.Signature(plain)
    call = ", ".join(p.name if p.kind is not inspect.Parameter.KEYWORD_ONLY else f"{p.name}={p.name}" for p in params)
    namespace: dict[str, object] = {"_impl": impl}
    defaults = {f"_default_{p.name}": p.default for p in params if p.default is not p.empty}
    namespace.update(defaults)
    rendered = ", ".join(
        str(p.replace(default=inspect.Parameter.empty)) + (f"=_default_{p.name}" if p.default is not p.empty else "")
        for p in signature.parameters.values()
    )
    exec(
        f"def {name}({rendered}):\n    return _impl({call})\n", namespace
    )  # the signature is the contract method's own
    function = namespace[name]
    assert isinstance(function, types.FunctionType)
    return function
