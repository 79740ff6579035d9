"""Call checks for structural implementers: a proxy that checks the contract's methods and forwards the rest."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

from kvcontract.contracts.enforcement.call_checks import wrap
from kvcontract.contracts.enforcement.errors import PUBLIC_MODULE, ContractDefinitionError
from kvcontract.contracts.enforcement.members import contract_methods, is_contract
from kvcontract.contracts.enforcement.mode import settings

__all__ = ["checked"]

_T = TypeVar("_T")


def checked(obj: _T, contract: type[object]) -> _T:
    """Give ``obj``, a structural implementer of ``contract``, the call checks of a subclass.

    Returns a proxy that checks every contract method call and forwards everything else
    (optional methods ``obj`` lacks run the contract's default), or ``obj`` itself while
    checks are off.
    """
    if not is_contract(contract):
        raise TypeError(f"checked() takes a kvcontract contract such as OffloadingManager, got {contract!r}")
    required = getattr(contract, "__abstractmethods__", frozenset[str]())
    missing = sorted(name for name in required if not callable(getattr(obj, name, None)))
    if missing:
        raise ContractDefinitionError(
            f"{type(obj).__name__} does not implement {contract.__name__}: missing {', '.join(missing)}"
        )
    state = settings()
    if not state.checks:
        return obj
    proxy = _proxy_type(contract, state.full)(obj)
    return cast(_T, proxy)  # the proxy forwards every attribute to obj, so it stands for obj


_proxy_types: dict[tuple[type, bool], type] = {}


def _proxy_type(contract: type, full: bool) -> type:
    """A class whose instances forward to a target and check the contract's methods."""
    known = _proxy_types.get((contract, full))
    if known is not None:
        return known
    namespace: dict[str, object] = {
        "__module__": PUBLIC_MODULE,
        "__slots__": ("_kvcontract_target",),
        "__init__": _proxy_init,
        "__getattr__": _proxy_getattr,
        "__repr__": _proxy_repr,
    }
    proxy = type(f"Checked{contract.__name__}", (), namespace)
    for name, contract_fn in contract_methods(contract).items():
        forward = _forward_to_target(name, contract_fn)
        setattr(proxy, name, wrap(proxy, name, forward, contract_fn, full))
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
