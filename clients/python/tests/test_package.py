"""The package itself: Python 3.10 syntax, and a wheel that pip can install offline."""

from __future__ import annotations

import ast
import os
import sys
import tempfile
import unittest
import zipfile

HERE = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(HERE, "build_backend"))

import writ_build  # noqa: E402


class Package(unittest.TestCase):
    def test_python_310_syntax(self) -> None:
        for _, disk in writ_build._package_files():
            with open(disk, encoding="utf-8") as f:
                src = f.read()
            with self.subTest(disk):
                ast.parse(src, disk, feature_version=(3, 10))

    def test_wheel(self) -> None:
        d = tempfile.mkdtemp()
        self.assertEqual(writ_build.get_requires_for_build_wheel(), [], "nothing to fetch to build")
        name = writ_build.build_wheel(d)
        self.assertEqual(name, "writ_client-0.1.0-py3-none-any.whl")
        with zipfile.ZipFile(os.path.join(d, name)) as z:
            names = set(z.namelist())
            record = z.read("writ_client-0.1.0.dist-info/RECORD").decode()
        for want in ("writ/__init__.py", "writ/client.py", "writ/guard.py", "writ/aio.py", "writ/state.py", "writ/py.typed",
                     "writ_client-0.1.0.dist-info/METADATA", "writ_client-0.1.0.dist-info/WHEEL"):
            self.assertIn(want, names)
            self.assertIn(want + ",sha256=", record)


if __name__ == "__main__":
    unittest.main()
