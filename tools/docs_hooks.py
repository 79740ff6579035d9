"""mkdocs hook: renders the configuration reference from the config's JSON schema.

A page that contains the line ``<!-- config-reference -->`` gets, in its place, one table
per config model with each field's type, default and description, so the reference can
never drift from the models.
"""

from __future__ import annotations

import json
from typing import Any

from kvcontract.config import LAYOUT_PRESETS, config_json_schema

MARKER = "<!-- config-reference -->"


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Replace the marker with the generated reference."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render_reference(config_json_schema()))


def render_reference(schema: dict[str, Any]) -> str:
    """Markdown tables for the top-level model and every model it refers to."""
    definitions: dict[str, Any] = schema.get("$defs", {})
    sections = [_model_section("KVContractConfig (top level)", schema)]
    sections += [_model_section(name, model) for name, model in sorted(definitions.items())]
    presets = "\n".join(
        f"| `{name}` | {', '.join(f'{k}={v}' for k, v in shape.items())} |" for name, shape in LAYOUT_PRESETS.items()
    )
    sections.append(f"## Layout presets\n\n| preset | fields |\n|---|---|\n{presets}\n")
    return "\n".join(sections)


def _model_section(title: str, model: dict[str, Any]) -> str:
    lines = [f"## {title}", "", model.get("description", "").strip(), ""]
    lines += ["| field | type | default | description |", "|---|---|---|---|"]
    required = set(model.get("required", []))
    for name, field in model.get("properties", {}).items():
        default = "required" if name in required else f"`{json.dumps(field.get('default'))}`"
        description = " ".join(field.get("description", "").split())
        lines.append(f"| `{name}` | {_type(field)} | {default} | {description} |")
    return "\n".join(lines) + "\n"


def _type(field: dict[str, Any]) -> str:
    if "$ref" in field:
        name = field["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "const" in field:
        return f"`{json.dumps(field['const'])}`"
    if "enum" in field:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in field["enum"])
    for combinator in ("anyOf", "oneOf"):
        if combinator in field:
            return " \\| ".join(_type(option) for option in field[combinator])
    if field.get("type") == "array":
        return f"list of {_type(field.get('items', {}))}"
    kind = str(field.get("type", "any"))
    bounds = [f"{label} {field[key]}" for key, label in (("minimum", ">="), ("maximum", "<=")) if key in field]
    return kind + (f" ({', '.join(bounds)})" if bounds else "")
