#!/usr/bin/env bash
# Installs Debian packages that are missing (as root, or with sudo); a fresh machine may
# not have the package lists yet, so they are fetched once if the first try fails.
#   scripts/apt-install.sh PACKAGE...
set -euo pipefail
sudo=""
if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
if ! DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null; then
    $sudo apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
fi
