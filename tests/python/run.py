#!/usr/bin/env python3
"""Runs one test module of tests/python with unittest (ctest: tests/python/CMakeLists.txt).

  run.py MODULE [--needs torch,sklearn]

Exits 77 (the ctest entries' SKIP_RETURN_CODE) with the reason when a needed Python module is
missing (Debian: apt-get install python3-torch python3-sklearn), 0 when every test passed, 1
otherwise.
"""

import argparse
import importlib
import os
import sys
import unittest

SKIP = 77


def main():
    p = argparse.ArgumentParser()
    p.add_argument("module")
    p.add_argument("--needs", default="torch")
    args = p.parse_args()
    missing = []
    for name in filter(None, args.needs.split(",")):
        try:
            importlib.import_module(name)
        except ImportError as e:
            missing.append(f"{name} ({e})")
    if missing:
        print(f"SKIP {args.module}: {sys.executable} cannot import {', '.join(missing)}; "
              "install python3-torch python3-sklearn (Debian) or configure with "
              "-DINAC_PYTHON3=<a python3 that has them>")
        return SKIP
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    suite = unittest.defaultTestLoader.loadTestsFromName(args.module)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
