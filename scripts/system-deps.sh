#!/usr/bin/env bash
# System packages the tests use: Debian's prometheus (prometheus + promtool) for the
# deployment tests. Installed only when missing; without root or sudo those tests skip
# with the reason shown.
set -euo pipefail
if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo -n"; else
    echo "system-deps: prometheus is missing and there is no root or sudo to install it" >&2
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "system-deps: install prometheus and promtool (2.42 or newer) by hand" >&2
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1 || {
    $SUDO apt-get update -qq >/dev/null
    $SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
}
# the package's service is not wanted: the tests start their own servers
$SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
