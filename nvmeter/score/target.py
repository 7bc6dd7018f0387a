"""`Target`: the method a run scores (a registered name or ``file.py:function``), checked before any work."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from nvmeter import errors, files
from nvmeter.workloads.versions import SCHEME, source_closure


@dataclass(frozen=True)
class Target:
    """The method to score: a registered one (``graph_mlp``) or ``FILE.py:FUNCTION``.

    Attributes:
        name: ``graph_mlp``, or ``file.py:function`` (the file's name, not its folder).
        registered: True for a method of :data:`nvmeter.workloads.methods.METHODS`.
        file: Absolute path of its source (the module's file for a registered method).
        function: The function's name (``method`` for registered modules; the Ladder's
            registry key for its variants).
        sha256: Of the source file, when the run started.
        difficulty: The registered method's own level (None for a file).
        sources: (module, sha256 of its code) of the source file and of every
            ``nvmeter.workloads`` module it imports, directly or through another (sorted by
            module): the code a run's figures depend on beyond the file itself (the Ladder's
            kernels live in modules of their own). Comments, docstrings and layout are not
            hashed (:func:`code_sha256`). Conservative: a module imported anywhere in a file counts, so
            the Ladder's variants, one file, all change version with either kernel module.
            None in records written before score record v4.
        sources_scheme: How ``sources`` was hashed (:data:`nvmeter.workloads.versions.SCHEMES`;
            1 in records before score record v5, None where ``sources`` is None).

    """

    name: str
    registered: bool
    file: str
    function: str
    sha256: str
    difficulty: int | None = None
    sources: tuple[tuple[str, str], ...] | None = None
    sources_scheme: int | None = None

    @classmethod
    def parse(cls, spec: str) -> Target:
        """Resolve ``spec`` without importing it (the worker imports it).

        Raises:
            UsageError: no such registered method, file, or top-level function in it;
                a file that is not Python or does not parse, is not a regular file, or is
                over :data:`nvmeter.files.SOURCE_LIMIT_BYTES`.

        """
        from nvmeter.workloads import methods

        spec = spec.strip()
        if ":" not in spec:
            if spec in methods.METHODS:
                return cls._registered(methods.METHODS[spec])
            hint = (
                "FILE.py:FUNCTION"
                if spec.endswith(".py")
                else f"FILE.py:FUNCTION or one of: {', '.join(methods.METHODS)}"
            )
            raise errors.UsageError(f"unknown method {spec!r}; give {hint}")
        file, function = spec.rsplit(":", 1)
        path = Path(file).expanduser()
        if not function.isidentifier():
            raise errors.UsageError(f"{spec!r}: {function!r} is not a Python function name")
        if not path.is_file():
            raise errors.UsageError(f"{path}: no such file" if not path.exists() else f"{path} is not a file")
        if path.suffix != ".py":
            raise errors.UsageError(f"{path} is not a .py file")
        source = files.read_bytes(path, files.SOURCE_LIMIT_BYTES, "a method's .py file")
        try:
            tree = ast.parse(source, filename=str(path))
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            where = f" (line {exc.lineno})" if getattr(exc, "lineno", None) else ""
            raise errors.UsageError(f"{path} is not valid Python{where}: {getattr(exc, 'msg', exc)}") from exc
        names = _top_level_names(tree)
        if function not in names:
            defs = (ast.FunctionDef, ast.AsyncFunctionDef)
            public = [n.name for n in tree.body if isinstance(n, defs) and not n.name.startswith("_")]
            known = sorted(public)
            more = f" and {len(known) - 8} more" if len(known) > 8 else ""  # never cut silently
            listed = f"its functions: {', '.join(known[:8])}{more}" if known else "it defines no function"
            found = f" ({listed})"
            raise errors.UsageError(f"{path} has no top-level function {function!r}{found}")
        literal = _bound_to_a_literal(tree, function)
        if literal is not None:  # caught here, not in the first run, which left a folder and a log
            raise errors.UsageError(f"{path}:{function} is {literal}, not a function")
        return cls(
            name=f"{path.name}:{function}",
            registered=False,
            file=str(path.resolve()),
            function=function,
            sha256=hashlib.sha256(source).hexdigest(),
            sources=source_closure(path.name, source),
            sources_scheme=SCHEME,
        )

    @classmethod
    def _registered(cls, spec) -> Target:
        origin = importlib.util.find_spec(spec.module).origin
        return cls(
            name=spec.name,
            registered=True,
            file=origin,
            function=spec.name if spec.family else "method",
            sha256=hashlib.sha256(Path(origin).read_bytes()).hexdigest(),
            difficulty=spec.difficulty,
            sources=tuple(sorted(spec.sources().items())),
            sources_scheme=SCHEME,
        )

    def hashed_as(self, scheme: int | None) -> Target:
        """This target with its ``sources`` hashed as ``scheme`` (a record's), to compare with it.

        The code is read again: from the registry's module, or from :attr:`file`.

        Raises:
            UsageError: the file is gone or no longer parses.
        """
        if scheme is None or scheme == self.sources_scheme:
            return self
        if self.registered:
            from nvmeter.workloads import methods

            sources = tuple(sorted(methods.METHODS[self.name].sources(scheme).items()))
        else:
            path = Path(self.file)
            source = files.read_bytes(path, files.SOURCE_LIMIT_BYTES, "a method's .py file")
            sources = source_closure(path.name, source, scheme)
        return replace(self, sources=sources, sources_scheme=scheme)

    def load_request(self) -> dict:
        """The worker's ``load`` request for this target."""
        if self.registered:
            return {"method": self.name, "name": self.name}
        return {"file": self.file, "function": self.function, "name": self.name}

    def same_method(self, other: Target) -> bool:
        """Same name, source file, source bytes and imported workloads modules."""
        mine = self.hashed_as(other.sources_scheme)
        return (mine.name, mine.file, mine.function, mine.sha256, mine.sources) == (
            other.name,
            other.file,
            other.function,
            other.sha256,
            other.sources,
        )

    def to_dict(self) -> dict:
        """JSON form (``sources`` as a {module: sha256} mapping)."""
        d = asdict(self)
        d["sources"] = None if self.sources is None else dict(self.sources)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Target:
        """Inverse of :meth:`to_dict` (every field is required: older records are upgraded first).

        Raises:
            KeyError, TypeError, AttributeError: a damaged target (the caller names the file).
        """
        fields = {k: d[k] for k in cls.__dataclass_fields__}
        if fields["sources"] is not None:
            fields["sources"] = tuple(sorted((str(m), str(h)) for m, h in fields["sources"].items()))
        return cls(**fields)


_LITERALS = (ast.Constant, ast.List, ast.Tuple, ast.Dict, ast.Set, ast.JoinedStr, ast.ListComp, ast.DictComp)


def _bound_to_a_literal(tree: ast.Module, name: str) -> str | None:
    """``"bound to a literal (int, line 3)"`` where the module's top level binds ``name`` only to literals."""
    assignments = [node for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))]
    bound = [
        node
        for node in assignments
        if any(
            isinstance(t, ast.Name) and t.id == name
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        )
    ]
    literal = [n for n in bound if isinstance(n.value, _LITERALS)]
    if not bound or len(literal) < len(bound) or name in _defined(tree):
        return None
    last = literal[-1].value
    kind = type(last.value).__name__ if isinstance(last, ast.Constant) else type(last).__name__.lower()
    return f"bound to a literal ({kind}, line {last.lineno})"


def _defined(tree: ast.Module) -> set[str]:
    """Names bound otherwise than by assignment (defs, classes, imports, conditional blocks)."""
    others = [n for n in tree.body if not isinstance(n, (ast.Assign, ast.AnnAssign))]
    return _top_level_names(ast.Module(body=others, type_ignores=[]))


def _top_level_names(tree: ast.Module) -> set[str]:
    """Names a module binds at its top level (defs, classes, assignments, imports)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.If, ast.Try)):  # conditional definitions: look one level in
            names |= _top_level_names(ast.Module(body=list(ast.iter_child_nodes(node)), type_ignores=[]))
    return names
