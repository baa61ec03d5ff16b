"""manypy-package inspect: an archive's manifest, its entries (size,
compression, alignment of their data) and the modules it expects the
server's Python to provide, read with zipfile alone (no torch), so that it
works on any archive, even one whose manifest is invalid."""

import json
import os
import sys
import zipfile

from . import manifest as _manifest


def _entry_table(path):
    """The archive's entries (name relative to the top folder, sizes,
    compression) without importing torch."""
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
    top = {i.filename.split("/", 1)[0] for i in infos}
    strip = len(top.pop()) + 1 if len(top) == 1 else 0
    rows = []
    with open(path, "rb") as f:
        for info in infos:
            f.seek(info.header_offset + 26)
            name_len, extra_len = int.from_bytes(f.read(2), "little"), int.from_bytes(f.read(2), "little")
            offset = info.header_offset + 30 + name_len + extra_len
            method = "stored" if info.compress_type == zipfile.ZIP_STORED else (
                "deflated" if info.compress_type == zipfile.ZIP_DEFLATED else f"method {info.compress_type}")
            rows.append((info.filename[strip:], info.file_size, info.compress_size, method, offset))
    return rows


def _extern_modules(path):
    """The modules the archive expects the server's Python to provide
    (torch.package's .data/extern_modules), in recorded order; [] if none."""
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        top = {n.split("/", 1)[0] for n in names}
        entry = f"{next(iter(top))}/.data/extern_modules" if len(top) == 1 else None
        if not entry or entry not in names:
            return []
        return [line for line in zf.read(entry).decode("utf-8").splitlines() if line.strip()]


def _print_extern_modules(path):
    modules = _extern_modules(path)
    tops = sorted({m.split(".", 1)[0] for m in modules})
    print(f"extern modules ({len(modules)}; the server's Python must provide them, "
          f"from {len(tops)} top-level packages: {', '.join(tops)}):")
    for module in sorted(modules):
        print(f"  {module}")


def _variable_dims(manifest):
    """'input NAME [dims]; output NAME [dims]' for every -1 dimension, or
    None when the signature has none."""
    parts = []
    for kind in ("inputs", "outputs"):
        for spec in manifest.get(kind) or []:
            shape = spec.get("shape") if isinstance(spec, dict) else None
            dims = [j for j, d in enumerate(shape or []) if d == -1]
            if dims:
                parts.append(f"{kind[:-1]} {spec.get('name')} {dims}")
    return "; ".join(parts) or None


def cmd_inspect(args):
    manifest = None
    error = None
    try:
        with zipfile.ZipFile(args.archive) as zf:
            names = zf.namelist()
            top = {n.split("/", 1)[0] for n in names}
            entry = f"{next(iter(top))}/manypy/manifest.json" if len(top) == 1 else None
            raw = zf.read(entry) if entry and entry in names else None
        if raw is None:
            error = "no manypy/manifest.json in the archive"
        else:
            manifest = json.loads(raw)
            try:
                _manifest.validate_manifest(manifest)
            except ValueError as e:
                error = f"manifest is invalid: {e}"
    except (zipfile.BadZipFile, OSError, json.JSONDecodeError) as e:
        print(f"manypy-package: {args.archive}: {e}", file=sys.stderr)
        return 1
    print(f"archive: {args.archive} ({os.path.getsize(args.archive):,} bytes)")
    if manifest is not None:
        print("manifest:")
        print(_manifest.pretty(manifest))
        variable = _variable_dims(manifest)
        print(f"variable dimensions (-1: any size at serving time): {variable or 'none'}"
              f"{' (batch dimension excluded)' if variable and manifest.get('max_batch_size') else ''}")
    rows = _entry_table(args.archive)
    width = max([len(r[0]) for r in rows] + [5])
    print(f"entries ({len(rows)}):")
    print(f"  {'name':<{width}}  {'size':>12}  {'compressed':>12}  {'method':<8}  offset%64")
    for name, size, csize, method, offset in rows:
        print(f"  {name:<{width}}  {size:>12,}  {csize:>12,}  {method:<8}  {offset % 64}")
    _print_extern_modules(args.archive)
    if error:
        print(f"manypy-package: {args.archive}: {error}", file=sys.stderr)
        return 1
    return 0
