"""The base of every config model: frozen, unknown fields refused."""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING, ClassVar, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
)

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Value = TypeVar("_Value", bound="DataclassInstance")


class ConfigModel(BaseModel):
    """Frozen, and refuses unknown fields: a config means exactly what it says."""

    model_config: ClassVar[ConfigDict] = ConfigDict(extra="forbid", frozen=True)

    def as_value(self, value: type[_Value], **given: object) -> _Value:
        """The frozen ``value`` a component takes whole, from this config's fields of its fields' names
        and ``given`` (what the config holds in another form); a field the config lacks keeps its default.

        A field added to both travels from the config to the component without a third copy of its name.
        """
        names = {field.name for field in fields(value)} - given.keys()
        return value(**self.model_dump(include=names), **given)
