"""What an archive's interned source does that matters when it is loaded
elsewhere, read from the exporter's dependency graph (module -> the modules
it imports, each interned module with its source):

- optional_externs: extern modules imported only inside `try:` blocks that
  catch ImportError, and needed by no pickle: the model runs without them,
  so a server whose Python lacks them must still load the archive
  (the server's runtime, manypy_model_runtime, reads the list from
  manypy/optional_modules);
- file_uses: where interned code uses `__file__`, which inside an archive
  names no file on disk (for the load check's hint and a warning);
- uses_torch_compile: whether a module's source calls torch.compile (a
  compiled model, which PyTorch 1.x cannot package).

Plain Python (ast); no torch.
"""

import ast

# Handlers that catch a failed import.
_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}


def _catches_import_error(handler):
    if handler.type is None:  # bare except
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    for t in types:
        name = t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", None)
        if name in _IMPORT_ERRORS:
            return True
    return False


def _resolve(module_name, is_package, level, target):
    """The absolute name of `from <level dots><target> import ...` in module_name."""
    if level == 0:
        return target
    parts = module_name.split(".") if is_package else module_name.split(".")[:-1]
    if level - 1 > len(parts):
        return None
    base = parts[:len(parts) - (level - 1)]
    return ".".join(base + ([target] if target else [])) or None


def imports(source, module_name, is_package):
    """[(imported name, guarded, line)] for every import statement in
    `source`: `from a import b` gives both a and a.b (b may be a module).
    guarded: inside the body of a try whose handlers catch ImportError (a
    function's body starts unguarded: it runs later, outside the try)."""
    found = []

    def visit(node, guarded):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.append((alias.name, guarded, node.lineno))
            return
        if isinstance(node, ast.ImportFrom):
            base = _resolve(module_name, is_package, node.level, node.module)
            if base:
                found.append((base, guarded, node.lineno))
                for alias in node.names:
                    if alias.name != "*":
                        found.append((f"{base}.{alias.name}", guarded, node.lineno))
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            guarded = False
        if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            inner = guarded or any(_catches_import_error(h) for h in node.handlers)
            for child in node.body:
                visit(child, inner)
            for child in node.handlers + node.orelse + node.finalbody:
                visit(child, guarded)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, guarded)

    visit(ast.parse(source), False)
    return found


def _touches(imported, module):
    """Whether importing `imported` needs `module` (itself or a parent package)."""
    return imported == module or imported.startswith(module + ".")


def _interned_sources(graph):
    for name in graph.nodes:
        attrs = graph.nodes[name]
        if attrs.get("source") is not None:
            yield name, attrs["source"], bool(attrs.get("is_package"))


def optional_externs(graph, externs):
    """The modules among `externs` that only guarded imports of interned
    modules ask for (no pickle, no unguarded import), sorted."""
    scanned = {}
    for name, source, is_package in _interned_sources(graph):
        try:
            scanned[name] = imports(source, name, is_package)
        except SyntaxError:  # torch.package compiled it; nothing to learn here
            scanned[name] = None
    optional = []
    for module in externs:
        askers = list(graph.predecessors(module)) if module in graph.nodes else []
        if not askers:
            continue
        ok = True
        for asker in askers:
            found = scanned.get(asker)
            if found is None:  # a pickle ("<model.model.pkl>") or unreadable source
                ok = False
                break
            touching = [guarded for imported, guarded, _ in found if _touches(imported, module)]
            if not touching or not all(touching):
                ok = False
                break
        if ok:
            optional.append(module)
    return sorted(optional)


def file_uses(graph):
    """[(file inside the archive, line)] where interned modules use __file__."""
    uses = []
    for name, source, is_package in _interned_sources(graph):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        file = name.replace(".", "/") + ("/__init__.py" if is_package else ".py")
        lines = sorted({n.lineno for n in ast.walk(tree)
                        if isinstance(n, ast.Name) and n.id == "__file__"})
        uses += [(file, line) for line in lines]
    return sorted(uses)


def compiles(graph):
    """Whether an interned module of the graph calls torch.compile."""
    return any(uses_torch_compile(source) for _, source, _ in _interned_sources(graph))


def uses_torch_compile(source):
    """Whether `source` names torch.compile (`torch.compile(...)`, or
    `from torch import compile`)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr == "compile" and
                isinstance(node.value, ast.Name) and node.value.id == "torch"):
            return True
        if (isinstance(node, ast.ImportFrom) and node.module == "torch" and
                any(alias.name == "compile" for alias in node.names)):
            return True
    return False
