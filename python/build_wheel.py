#!/usr/bin/env python3
"""Builds the `aon` Python package as a wheel (pure Python, py3-none-any) from
the build's aon-python folder, with the standard library only (a wheel is a
zip with a .dist-info folder: PEP 427, core metadata 2.1).

    build_wheel.py --src BUILD/lib/aon-python --version 0.1.0 --out BUILD/dist

In it: the package `aon` (the reader `aon.load`, the step/range/capture API,
and the hooks that aon-run's processes load). Not in it: sitecustomize.py
(installed into site-packages it would run in every Python process; aon-run
puts it on PYTHONPATH of the processes it profiles) and the PyTorch operator
observer (built for one torch version: python/CMakeLists.txt).
Prints the wheel's path.
"""
import argparse
import base64
import hashlib
import os
import sys
import zipfile

FILES = ["__init__.py", "_agent.py", "_hook.py", "_jax_hook.py", "_schema.py", "reader.py"]


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--src", required=True, help="the build's aon-python folder")
    p.add_argument("--version", required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()
    dist = "aon-%s.dist-info" % args.version
    metadata = "\n".join([
        "Metadata-Version: 2.1",
        "Name: aon",
        "Version: " + args.version,
        "Summary: AON's Python side: read a profiled job's records as tables (aon.load), "
        "mark steps and ranges",
        "Requires-Python: >=3.9",
        "Requires-Dist: numpy",
        "Requires-Dist: h5py",
        "Provides-Extra: pandas",
        "Requires-Dist: pandas; extra == \"pandas\"",
        "", ""])
    wheel = "Wheel-Version: 1.0\nGenerator: aon build_wheel.py\nRoot-Is-Purelib: true\n" \
            "Tag: py3-none-any\n"
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "aon-%s-py3-none-any.whl" % args.version)
    tmp = path + ".partial"
    records = []
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        def add(name, data):
            info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            records.append(record_line(name, data))
        for f in FILES:
            with open(os.path.join(args.src, "aon", f), "rb") as src:
                add("aon/" + f, src.read())
        add(dist + "/METADATA", metadata.encode())
        add(dist + "/WHEEL", wheel.encode())
        records.append(dist + "/RECORD,,")
        info = zipfile.ZipInfo(dist + "/RECORD", date_time=(2026, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        z.writestr(info, "\n".join(records) + "\n")
    os.replace(tmp, path)
    print(path)


if __name__ == "__main__":
    sys.exit(main())
