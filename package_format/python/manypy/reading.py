"""Reading an archive back: its entries, its manifest, where an entry's
data starts, the Python-side structural checks (a subset of the C++
checker's), and a TorchScript archive's module."""

import io
import json
import os
import struct
import zipfile

import torch
from torch.package import PackageImporter

from manypy_model_runtime.host import top_folder

from . import manifest as _manifest
from .layout import PICKLE_PACKAGE, PICKLE_RESOURCE, STORAGE_ALIGNMENT


def archive_entries(path):
    """[(name relative to the top folder, ZipInfo)] in archive order."""
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
    top = top_folder([i.filename for i in infos], path)
    return [(i.filename[len(top) + 1:], i) for i in infos]


def read_manifest(path, validate=True):
    """The manifest dict of an archive (validated unless validate=False)."""
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
        top = top_folder(names, path)
        entry = f"{top}/{_manifest.MANIFEST_PACKAGE}/{_manifest.MANIFEST_RESOURCE}"
        if entry not in names:
            raise ValueError(f"{path}: no {_manifest.MANIFEST_PACKAGE}/{_manifest.MANIFEST_RESOURCE}")
        data = zf.read(entry)
    if not validate:
        return json.loads(data)
    try:
        return _manifest.loads(data)
    except ValueError as e:
        raise ValueError(f"{path}: manifest {e}") from None


def data_offset(path, info):
    """Byte offset of an entry's data in the file (after its local header)."""
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        header = f.read(30)
    if len(header) != 30 or header[:4] != b"PK\x03\x04":
        raise ValueError(f"{path}: bad local header for {info.filename}")
    name_len, extra_len = struct.unpack("<HH", header[26:30])
    return info.header_offset + 30 + name_len + extra_len


def check_archive(path):
    """Python-side structural checks (a subset of the C++ checker's): one
    top-level folder, no path tricks, a valid manifest, the entry point's
    files present, every .data/*.storage entry stored and 64-byte aligned.
    Returns the manifest; raises ValueError naming the problem."""
    entries = archive_entries(path)
    for rel, info in entries:
        name = info.filename
        if name.startswith("/") or "\\" in name or "\0" in name or ".." in name.split("/"):
            raise ValueError(f"{path}: unsafe entry name {name!r}")
    manifest = read_manifest(path)
    names = {rel for rel, _ in entries}
    for rel, info in entries:
        if rel.startswith(".data/") and rel.endswith(".storage"):
            if info.compress_type != zipfile.ZIP_STORED:
                raise ValueError(f"{path}: {rel} is compressed; storages must be stored")
            if data_offset(path, info) % STORAGE_ALIGNMENT:
                raise ValueError(f"{path}: {rel} is not {STORAGE_ALIGNMENT}-byte aligned")
    ep = manifest["entry_point"]
    needed = []
    if ep["kind"] in ("pickle", "torchscript", "aoti"):
        default = {"pickle": PICKLE_RESOURCE, "torchscript": _manifest.TORCHSCRIPT_RESOURCE,
                   "aoti": _manifest.AOTI_RESOURCE}[ep["kind"]]
        needed.append(f"{ep.get('package', PICKLE_PACKAGE).replace('.', '/')}/"
                      f"{ep.get('resource', default)}")
    else:
        mod = ep["module"].replace(".", "/")
        if f"{mod}.py" not in names and f"{mod}/__init__.py" not in names:
            raise ValueError(f"{path}: entry_point.module {ep['module']!r} is not in the archive")
        if "weights" in ep:
            needed.append(f"{ep['weights']['package'].replace('.', '/')}/{ep['weights']['resource']}")
    for rel in needed:
        if rel not in names:
            raise ValueError(f"{path}: entry point resource {rel} is missing")
    return manifest


def load_torchscript(path, manifest):
    """The TorchScript module a torchscript-platform archive holds (what the
    server's C++ loads with torch::jit::load). Here rather than in
    manypy.torchscript, which builds on this module, so that the two never
    import each other."""
    ep = manifest["entry_point"]
    data = PackageImporter(os.fspath(path)).load_binary(
        ep.get("package", _manifest.TORCHSCRIPT_PACKAGE), ep.get("resource", _manifest.TORCHSCRIPT_RESOURCE))
    return torch.jit.load(io.BytesIO(data))
