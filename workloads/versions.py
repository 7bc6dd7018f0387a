"""A method's version: the sha256 of its code and of the workloads modules it imports.

A method's figures depend on more than its own file (the Ladder's kernels live in modules of
their own), and not on its comments: a version is the hash of the code's tokens, without
comments, docstrings or layout, of the method's file and of every ``nvmeter.workloads`` module
it reaches by import, found by reading the files (nothing is imported). The scorer's records
(score record v4, ``target.sources``) and the evaluation's (workloads record v4, each method's
``sources``) carry it; a score folder and ``evaluate --resume`` compare it.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import io
import tokenize
from pathlib import Path

from nvmeter import errors

_PACKAGE = "nvmeter.workloads"


def _imported_workloads(tree: ast.Module) -> set[str]:
    """The ``nvmeter.workloads`` modules a module imports anywhere in it (inside functions too)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith(_PACKAGE + "."))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module == _PACKAGE:  # from nvmeter.workloads import ladder_kernels
                found.update(f"{_PACKAGE}.{a.name}" for a in node.names)
            elif node.module.startswith(_PACKAGE + "."):
                found.add(node.module)
    return found


def _docstring_starts(tree: ast.Module) -> set[tuple[int, int]]:
    """(line, column) where each docstring of the module, its classes and functions starts."""
    starts = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            value = first.value if isinstance(first, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                starts.add((first.lineno, first.col_offset))
    return starts


def code_sha256(source: bytes, tree: ast.Module) -> str:
    """sha256 of the code's tokens, without comments, docstrings or layout: what runs, not how it reads.

    Tokens rather than the syntax tree, whose dump differs between Python versions.
    """
    skip = _docstring_starts(tree)
    digest = hashlib.sha256()
    layout = (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING)
    after_docstring = False
    for tok in tokenize.tokenize(io.BytesIO(source).readline):
        if tok.type == tokenize.STRING and tok.start in skip:
            after_docstring = True  # its statement's NEWLINE goes with it
            continue
        if tok.type in layout or (after_docstring and tok.type == tokenize.NEWLINE):
            after_docstring = False if tok.type == tokenize.NEWLINE else after_docstring
            continue
        after_docstring = False
        digest.update(f"{tok.type}:{tok.string}\n".encode())
    return digest.hexdigest()


def source_closure(name: str, source: bytes) -> tuple[tuple[str, str], ...]:
    """(module, code sha256) of ``source`` (called ``name``) and every workloads module it reaches.

    Imports are followed by reading each module's file (nothing is imported); a name that
    is not a module of the package (an imported function) is left out. Each hash is
    :func:`code_sha256`'s, so an edit to comments or docstrings is not a new version.

    Raises:
        UsageError: a module on the way does not parse.
    """
    out: dict[str, str] = {}
    todo = [(name, source)]
    while todo:
        where, text = todo.pop()
        try:
            tree = ast.parse(text)
            out[where] = code_sha256(text, tree)
        except (SyntaxError, ValueError, tokenize.TokenError) as exc:
            raise errors.UsageError(f"{where} is not valid Python: {exc}") from exc
        for module in sorted(_imported_workloads(tree) - out.keys()):
            spec = importlib.util.find_spec(module)
            if spec is None or not spec.origin or not spec.origin.endswith(".py"):
                continue
            todo.append((module, Path(spec.origin).read_bytes()))
    return tuple(sorted(out.items()))
