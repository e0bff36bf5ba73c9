#!/usr/bin/env bash
# Builds the plugins in release mode and installs them.
#   PREFIX   install prefix (default /opt/cni; binaries go to $PREFIX/bin)
#   BINDIR   overrides $PREFIX/bin
#   DESTDIR  staging root prepended to every path (for packaging)
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=${PREFIX:-/opt/cni}
BINDIR=${BINDIR:-$PREFIX/bin}
DESTDIR=${DESTDIR:-}

out=$(scripts/build-release)

# One plugin per directory under plugins/, binary named after the directory
# (the CNI "type").
for dir in plugins/*/; do
    name=$(basename "$dir")
    install -D -m 0755 "$out/$name" "$DESTDIR$BINDIR/$name"
    echo "installed $DESTDIR$BINDIR/$name"
done
