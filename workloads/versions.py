"""A method's version: the sha256 of its code and of the workloads modules it imports.

A method's figures depend on more than its own file (the Ladder's kernels live in modules of
their own), and not on its comments: a version is the hash of the code's tokens, without
comments, docstrings or layout, of the method's file and of every ``nvmeter.workloads`` module
it reaches by import, found by reading the files (nothing is imported). The scorer's records
(score record v4, ``target.sources``) and the evaluation's (workloads record v4, each method's
``sources``) carry it with the scheme it was hashed with (``sources_scheme``, score and
workloads records v5); a score folder and ``evaluate --resume`` compare it in the record's scheme.
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


# How a version hashes code (records name it, ``sources_scheme``):
#   1: each token as ``tokenize``'s type number and text. Python 3.12 renumbered the token types
#      and split f-strings into FSTRING_* tokens, so the same file hashed differently on 3.11 and
#      3.12 (78 of 83 nvmeter modules) and again on 3.13 (58): a folder scored on the H200
#      (3.12) refused the same code run on CI's 3.11. Kept to compare records made with it.
#   2: each token as its type's name and text, an f-string as one STRING of its source text
#      (what 3.11 reads): the same on Python 3.11, 3.12 and 3.13 (tests/test_versions.py).
SCHEMES = (1, 2)
SCHEME = 2


def _tokens_v1(source: bytes, lines: list[str]):
    for tok in tokenize.tokenize(io.BytesIO(source).readline):
        yield tok, f"{tok.type}:{tok.string}"


def _text(lines: list[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    """The source text from ``start`` to ``end`` ((row, column), rows from 1)."""
    (r0, c0), (r1, c1) = start, end
    if r0 == r1:
        return lines[r0 - 1][c0:c1]
    return lines[r0 - 1][c0:] + "".join(lines[r0 : r1 - 1]) + lines[r1 - 1][:c1]


def _tokens_v2(source: bytes, lines: list[str]):
    fstring = getattr(tokenize, "FSTRING_START", None)  # Python 3.12 on
    depth, start = 0, None
    for tok in tokenize.tokenize(io.BytesIO(source).readline):
        if fstring is not None and tok.type == fstring:
            depth += 1
            start = tok if depth == 1 else start
            continue
        if depth:
            if tok.type == tokenize.FSTRING_END:
                depth -= 1
                if not depth:  # the whole f-string, as Python 3.11 reads it
                    text = _text(lines, start.start, tok.end)
                    yield tok._replace(type=tokenize.STRING, string=text, start=start.start), f"STRING:{text}"
            continue
        yield tok, f"{tokenize.tok_name[tok.type]}:{tok.string}"


def code_sha256(source: bytes, tree: ast.Module, scheme: int = SCHEME) -> str:
    """sha256 of the code's tokens, without comments, docstrings or layout: what runs, not how it reads.

    Tokens rather than the syntax tree, whose dump differs between Python versions; ``scheme``
    says how a token is hashed (:data:`SCHEMES`; 2 is the same on Python 3.11 to 3.13).

    Raises:
        ValueError: an unknown scheme.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown version scheme {scheme!r} (known: {', '.join(map(str, SCHEMES))})")
    skip = _docstring_starts(tree)
    digest = hashlib.sha256()
    layout = (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING)
    after_docstring = False
    encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    lines = source.decode(encoding).splitlines(keepends=True)
    tokens = _tokens_v1 if scheme == 1 else _tokens_v2
    for tok, text in tokens(source, lines):
        if tok.type == tokenize.STRING and tok.start in skip:
            after_docstring = True  # its statement's NEWLINE goes with it
            continue
        if tok.type in layout or (after_docstring and tok.type == tokenize.NEWLINE):
            after_docstring = False if tok.type == tokenize.NEWLINE else after_docstring
            continue
        after_docstring = False
        digest.update(f"{text}\n".encode())
    return digest.hexdigest()


def source_closure(name: str, source: bytes, scheme: int = SCHEME) -> tuple[tuple[str, str], ...]:
    """(module, code sha256) of ``source`` (called ``name``) and every workloads module it reaches.

    Imports are followed by reading each module's file (nothing is imported); a name that
    is not a module of the package (an imported function) is left out. Each hash is
    :func:`code_sha256`'s under ``scheme``, so an edit to comments or docstrings is not a new
    version.

    Raises:
        UsageError: a module on the way does not parse.
    """
    out: dict[str, str] = {}
    todo = [(name, source)]
    while todo:
        where, text = todo.pop()
        try:
            tree = ast.parse(text)
            out[where] = code_sha256(text, tree, scheme)
        except (SyntaxError, ValueError, tokenize.TokenError) as exc:
            raise errors.UsageError(f"{where} is not valid Python: {exc}") from exc
        for module in sorted(_imported_workloads(tree) - out.keys()):
            spec = importlib.util.find_spec(module)
            if spec is None or not spec.origin or not spec.origin.endswith(".py"):
                continue
            todo.append((module, Path(spec.origin).read_bytes()))
    return tuple(sorted(out.items()))
