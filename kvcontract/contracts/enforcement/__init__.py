"""Runtime enforcement of the contracts: ``@override`` and override hints at class creation, beartype call checks.

Every class that inherits a contract is processed by :func:`~.classes.enforce_class` when it
is created (:class:`kvcontract.contracts.base.Contract` calls it from ``__init_subclass__``). Its
overrides must carry ``@override`` (:mod:`.markers`) and accept at least what their contract
accepts (:mod:`.signatures`), and the contract methods it implements
(or takes from a plain mixin, :mod:`.members`) are wrapped so that each call is checked
against the contract's own signature (:mod:`.call_checks`, worded by :mod:`.errors`);
structural implementers get the same checks through a proxy (:mod:`.proxies`).

The public names are :mod:`kvcontract.enforce`'s; the modes are described there.
"""
