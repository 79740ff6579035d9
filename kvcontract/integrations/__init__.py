"""Adapters that plug kvcontract into inference engines; each sits above the core and is imported on its own.

``import kvcontract`` never imports a subpackage of this one, so an engine stays an optional
dependency (``pip install 'kvcontract[vllm]'`` for :mod:`kvcontract.integrations.vllm`).
"""
