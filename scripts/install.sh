#!/usr/bin/env bash
# Builds the plugins in release mode and installs them.
#   PREFIX   install prefix (default /opt/cni; binaries go to $PREFIX/bin)
#   BINDIR   overrides $PREFIX/bin
#   DESTDIR  staging root prepended to every path (for packaging)
#   TOOLDIR  if set, also installs the cnitool debugging tool there
#            (e.g. TOOLDIR=/usr/local/bin); it is not a plugin, so it does
#            not go to BINDIR
#   WITH_NOOP=1  also installs noop, the test plugin (left out by default:
#            run as root it reads and rewrites whatever file its config's
#            debugFile or a DEBUG= argument names)
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=${PREFIX:-/opt/cni}
BINDIR=${BINDIR:-$PREFIX/bin}
DESTDIR=${DESTDIR:-}
TOOLDIR=${TOOLDIR:-}
WITH_NOOP=${WITH_NOOP:-}

out=$(scripts/build-release)

# One plugin per directory under plugins/, binary named after the directory
# (the CNI "type").
for dir in plugins/*/; do
    name=$(basename "$dir")
    if [ "$name" = noop ] && [ "$WITH_NOOP" != 1 ]; then
        echo "skipped $name (a test plugin; WITH_NOOP=1 installs it)"
        continue
    fi
    install -D -m 0755 "$out/$name" "$DESTDIR$BINDIR/$name"
    echo "installed $DESTDIR$BINDIR/$name"
done

if [ -n "$TOOLDIR" ]; then
    install -D -m 0755 "$out/cnitool" "$DESTDIR$TOOLDIR/cnitool"
    echo "installed $DESTDIR$TOOLDIR/cnitool"
fi
