"""Typer options derived from the option dataclasses (:mod:`ampbench.command_options`): a field's type, default, flags
and help become its command-line option, so an option is declared once.

typer reads a command's parameters from its signature; :func:`command` gives a function taking whole sections
(``options: RunOptions``) the flat signature typer needs -- one keyword per field, in the order declared -- and
calls it with the sections built.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from typing import Annotated, Any, Optional

import typer

from ampbench.cells import route
from ampbench.command_options import Flag

Opt = Optional
"""``Opt[X]``: typer's spelling of an optional option on py3.10 (it reads no ``X | None``), for the few options a
command declares itself (every option of run, train, diagnose and predict is declared once in
:mod:`ampbench.command_options` and derived here)."""


def _cli_type(hint: Any, default: Any) -> Any:
    """typer's spelling of a field's type: ``Optional[X]`` for ``X | None`` (typer on py3.10 reads no ``|``), and
    ``X`` where the command line's default is not None."""
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        inner = [a for a in args if a is not type(None)]
        (one,) = inner
        return one if default is not None else Optional[one]  # noqa: UP045  (typer on py3.10)
    return hint


def _parameters(section: type) -> list[inspect.Parameter]:
    hints = typing.get_type_hints(section)
    out = []
    for f in fields(section):
        flag: Flag = f.metadata["cli"]
        default = f.default if flag.cli_default is ... else flag.cli_default
        names, help_ = flag.resolved()
        panel = getattr(section, "PANEL", None)  # (rich's help panels: the sections, titled)
        info = typer.Argument(help=help_) if flag.argument else \
            typer.Option(*names, help=help_, rich_help_panel=panel)
        annotation = Annotated[_cli_type(hints[f.name], default), info]
        out.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation))
    return out


def _sections_of(owner: type) -> list[tuple[str | None, type]]:
    """(name, section) of a dataclass of sections (``RunOptions``), or (None, it) for one flat section."""
    hints = typing.get_type_hints(owner)
    if all(is_dataclass(hints[f.name]) for f in fields(owner)):
        return [(f.name, hints[f.name]) for f in fields(owner)]
    return [(None, owner)]


def command(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``'s parameters annotated with an option dataclass become that dataclass's fields on the command line
    (each section's, for a dataclass of sections); ``fn`` is called with the dataclasses built from them. Its other
    parameters stay as they are."""
    hints = typing.get_type_hints(fn, include_extras=True)
    plain: list[inspect.Parameter] = []
    declared: dict[str, tuple[type, list[tuple[str | None, type]]]] = {}
    for p in inspect.signature(fn).parameters.values():
        hint = hints.get(p.name)
        if isinstance(hint, type) and is_dataclass(hint):
            declared[p.name] = (hint, _sections_of(hint))
        else:
            plain.append(p.replace(annotation=hint, kind=inspect.Parameter.KEYWORD_ONLY))
    flat = [*plain]
    for _, sections in declared.values():
        for _, section in sections:
            flat.extend(_parameters(section))
    names = [p.name for p in flat]
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"options declared twice: {twice}"

    @functools.wraps(fn)
    def wrapper(**values: Any) -> Any:
        kwargs = {p.name: values[p.name] for p in plain}
        for param, (owner, sections) in declared.items():
            mine = {f.name: values[f.name] for _, section in sections for f in fields(section)}
            if sections[0][0] is None:  # (one flat section)
                kwargs[param] = owner(**mine)
            else:
                kwargs[param] = owner(**route(dict(sections), mine, f"{fn.__name__}()"))  # type: ignore[arg-type]
        return fn(**kwargs)

    wrapper.__signature__ = inspect.Signature(flat)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in flat}
    del wrapper.__wrapped__  # (typer would read fn's own signature through it)
    return wrapper
