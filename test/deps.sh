#!/bin/sh
#
# deps.sh: make sure the Debian packages the build and the tests need are
# installed. As root it installs the missing ones; otherwise it prints the
# command to run and fails. A C compiler and make are assumed. node and npm
# (the Node tests) are looked for as commands, as they often come from
# elsewhere than Debian (NodeSource); nodejs and npm are installed when
# either is missing.

packages="sqlite3 libsqlite3-dev libsqlite3-tcl tcl zlib1g-dev liblz4-dev libzstd-dev pkgconf python3 python3-venv python3-pip python3-setuptools python3-wheel"

for tool in cc make; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "deps.sh: $tool is not installed (on Debian: apt-get install build-essential)" >&2
    exit 1
  fi
done

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "deps.sh: not a Debian system; make sure these (or their equivalents) are installed: $packages" >&2
  exit 0
fi

missing=""
for p in $packages; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)
  [ "$status" = "install ok installed" ] || missing="$missing $p"
done
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || missing="$missing nodejs npm"
missing=${missing# }
[ -z "$missing" ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  echo "deps.sh: installing $missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update && apt-get install -y $missing
  exit $?
fi

echo "deps.sh: missing Debian packages: $missing" >&2
echo "deps.sh: run: sudo apt-get install -y $missing" >&2
exit 1
