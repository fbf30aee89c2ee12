"""The build backend of the writ client: PEP 517 hooks, standard library only.

Why not setuptools: `pip install ./clients/python` must work with no
package index. pip builds in an isolated environment and would download
the backend named in `requires`; setuptools older than 70.1 also needs
the separate `wheel` package to build a wheel. This package is pure
Python with no dependency, so its wheel is one zip of the `writ` folder
and a `.dist-info` (PEP 427 and the binary distribution format spec), and
its sdist one tar of this folder; both are written here, nothing is
fetched. The metadata below is the whole of the project's metadata.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import zipfile
from typing import Dict, List, Optional, Tuple

NAME = "writ_client"  # the distribution "writ-client", normalized for file names
VERSION = "0.1.0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "writ"

METADATA = f"""Metadata-Version: 2.1
Name: writ-client
Version: {VERSION}
Summary: Python client of writ, the governance runtime for AI agents
Requires-Python: >=3.10
Classifier: Programming Language :: Python :: 3
Classifier: Typing :: Typed
Description-Content-Type: text/markdown

"""

WHEEL = """Wheel-Version: 1.0
Generator: writ_build
Root-Is-Purelib: true
Tag: py3-none-any
"""


def _package_files() -> List[Tuple[str, str]]:
    """(path in the archive, path on disk) of every file of the package, sorted."""
    out = []
    base = os.path.join(ROOT, PACKAGE)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(filenames):
            if f.endswith((".py", ".typed")):
                disk = os.path.join(dirpath, f)
                out.append((os.path.relpath(disk, ROOT).replace(os.sep, "/"), disk))
    return out


def _metadata() -> str:
    readme = os.path.join(ROOT, "README.md")
    if not os.path.exists(readme):
        return METADATA
    with open(readme, encoding="utf-8") as f:
        return METADATA + f.read()


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings: Optional[Dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict] = None) -> List[str]:
    return []


def build_wheel(wheel_directory: str, config_settings: Optional[Dict] = None,
                metadata_directory: Optional[str] = None) -> str:
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    dist_info = f"{NAME}-{VERSION}.dist-info"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        def add(path: str, data: bytes) -> None:
            z.writestr(zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0)), data,
                       compress_type=zipfile.ZIP_DEFLATED)
            records.append(_record_line(path, data))

        for path, disk in _package_files():
            with open(disk, "rb") as f:
                add(path, f.read())
        add(f"{dist_info}/METADATA", _metadata().encode("utf-8"))
        add(f"{dist_info}/WHEEL", WHEEL.encode("utf-8"))
        record = f"{dist_info}/RECORD"
        z.writestr(zipfile.ZipInfo(record, date_time=(1980, 1, 1, 0, 0, 0)),
                   ("\n".join(records + [f"{record},,"]) + "\n").encode("utf-8"))
    return name


def build_sdist(sdist_directory: str, config_settings: Optional[Dict] = None) -> str:
    base = f"{NAME}-{VERSION}"
    name = base + ".tar.gz"
    files = _package_files() + [(p, os.path.join(ROOT, p)) for p in
                                ("pyproject.toml", "README.md", "build_backend/writ_build.py")
                                if os.path.exists(os.path.join(ROOT, p))]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        def add(path: str, data: bytes) -> None:
            info = tarfile.TarInfo(f"{base}/{path}")
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            t.addfile(info, io.BytesIO(data))

        add("PKG-INFO", _metadata().encode("utf-8"))
        for path, disk in files:
            with open(disk, "rb") as f:
                add(path, f.read())
    return name
