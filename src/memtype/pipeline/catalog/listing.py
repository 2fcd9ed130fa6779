"""The ``memtype functions [QUERY]`` sub-command: the catalog as a table."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from memtype.pipeline.analysis.operations import ANALYSIS_OPERATIONS
from memtype.pipeline.catalog.declarations import INSTALL_HINTS
from memtype.pipeline.catalog.entry import OUTPUT_KINDS, Entry, entries, excluded, search
from memtype.pipeline.catalog.operations import operations

__all__ = ["add_functions_command", "rows", "operation_rows", "not_installed", "left_out",
           "HEADER", "OPERATIONS_HEADER"]

HEADER = ("function", "framework", "dimensions", "output", "required arguments")
OPERATIONS_HEADER = ("operation", "frameworks", "input", "output", "parameters")


def rows(found: list[Entry]) -> list[tuple[str, str, str, str, str]]:
    """The table's rows for ``found`` (the framework of an entry whose library is not
    installed says so)."""
    return [(e.name, e.memory_type if e.installed else f"{e.memory_type} (not installed)",
             e.dimensions, e.output, ", ".join(e.required) or "-") for e in found]


def not_installed(found: list[Entry]) -> list[str]:
    """One line per library of ``found`` that is not installed: how to install it."""
    libraries = sorted({e.library for e in found if not e.installed})
    return [f"{library}: not installed; {INSTALL_HINTS.get(library, f'pip install {library}')}"
            for library in libraries]


def _rich_table(title: str, header: tuple[str, ...], body: Sequence[tuple[str, ...]]) -> Any:
    """A ``rich.table.Table``."""
    from rich.table import Table  # rich is an optional extra: imported only to print

    table = Table(title=title)
    for column in header:
        table.add_column(column, overflow="fold")
    for row in body:
        table.add_row(*row)
    return table


def _print(title: str, header: tuple[str, ...], body: Sequence[tuple[str, ...]]) -> None:
    """A rich table, or tab-separated text without rich (an optional extra)."""
    try:
        from rich.console import Console
    except ImportError:  # rich comes with memtype[all]: plain text without it, title first
        sys.stdout.write("\n".join([title, *("\t".join(r) for r in [header, *body])]) + "\n")
        return
    Console(soft_wrap=True).print(_rich_table(title, header, body))


def _cmd_functions(args: argparse.Namespace) -> int:
    """``memtype functions``."""
    query = " ".join(args.query)
    if args.operations:
        ops = operation_rows(query)
        _print(f"{len(ops)} operations", OPERATIONS_HEADER, ops)
        return 0
    if args.excluded:
        left = left_out(query)
        _print(f"{len(left)} functions left out", ("function", "why"), left)
        return 0
    found = [e for e in search(query)
             if (args.output is None or e.output == args.output)
             and (args.framework is None or e.memory_type == args.framework)]
    left = left_out(query) if query and not found else []
    if left:  # only left-out functions match: show them and why, not an empty table
        _print(f"0 catalog functions matching {query!r}; {len(left)} function(s) left out of "
               "the catalog match it, with why",
               ("function", "why left out"), left)
        return 0
    _print(f"{len(found)} catalog functions" + (f" matching {query!r}" if query else ""),
           HEADER, list(rows(found)))
    sys.stdout.write("".join(line + "\n" for line in not_installed(found)))
    return 0


def _parameters(parameters: Any) -> str:
    """``name=default, ...`` (``-`` for none)."""
    return ", ".join(f"{k}={v}" for k, v in parameters.items()) or "-"


def operation_rows(query: str = "") -> list[tuple[str, str, str, str, str]]:
    """The ``--operations`` table's rows whose name holds every word of ``query``: the
    catalog's operations, then the analysis operations (objects and measurements: their
    named inputs, e.g. ``labels, image``, and ``labels`` or ``measurements`` out).
    Frameworks are the memory types each has an implementation in."""
    words = query.lower().split()
    found = [(op.name, ", ".join(op.implementations), op.input, op.output,
              _parameters(op.parameters)) for op in operations()]
    found += [(op.name, ", ".join(op.implementations), ", ".join(op.inputs), op.output,
               _parameters(op.parameters)) for op in ANALYSIS_OPERATIONS.values()]
    return [row for row in found if all(w in row[0] for w in words)]


def left_out(query: str) -> list[tuple[str, str]]:
    """(name, reason) of each function left out of the catalog whose name or reason holds
    every word of ``query``."""
    words = query.lower().split()
    return [(x.name, x.reason) for x in excluded()
            if all(w in f"{x.name} {x.reason}".lower() for w in words)]


def add_functions_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``functions`` to the ``memtype`` command's sub-commands."""
    p = subparsers.add_parser(
        "functions", help="the function catalog: scikit-image, scipy.ndimage, pyclesperanto, "
                     "cucim.skimage",
        description="List the catalog's functions (usable as catalog.step(NAME, ...)) with "
                    "their framework, dimensionality (2d: per slice; nd: per slice or as a "
                    "volume; 3d: the volume), output kind and required arguments; a library "
                    "that is not installed is named, with how to install it. QUERY "
                    "words must all appear in the name, framework, output kind or summary.")
    p.add_argument("query", nargs="*", metavar="QUERY", help="words to search for")
    p.add_argument("--output", choices=OUTPUT_KINDS, default=None,
                   help="only functions with this output kind")
    p.add_argument("--framework", choices=sorted({e.memory_type for e in entries()}),
                   default=None,
                   help="only functions running in this framework")
    p.add_argument("--operations", action="store_true",
                   help="list the operations (one computation in several frameworks, "
                        "catalog.operation(NAME, ...)) instead")
    p.add_argument("--excluded", action="store_true",
                   help="list the functions left out of the catalog, and why")
    p.set_defaults(func=_cmd_functions)
