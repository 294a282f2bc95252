#!/usr/bin/env python3
"""Fetch an exact PyPI file (name version filename-suffix) and verify its sha256 from the PyPI JSON API.
usage: pypi_fetch.py NAME VERSION KIND(sdist|wheel) DESTDIR"""
import hashlib, json, sys, urllib.request, urllib.parse, os
name, ver, kind, dest = sys.argv[1:5]
meta = json.load(urllib.request.urlopen(f"https://pypi.org/pypi/{name}/json", timeout=60))
for f in meta["releases"][ver]:
    if f["packagetype"] == ("sdist" if kind == "sdist" else "bdist_wheel"):
        data = urllib.request.urlopen(urllib.parse.urljoin(f"https://pypi.org/pypi/{name}/json", f["url"]), timeout=300).read()
        h = hashlib.sha256(data).hexdigest()
        assert h == f["digests"]["sha256"], (h, f["digests"]["sha256"])
        open(os.path.join(dest, f["filename"]), "wb").write(data)
        print(f["filename"], len(data), h)
        break
