#!/bin/sh
#
# deps.sh [build|demo|test]: make sure the Debian packages that a level of
# work needs are installed: build (make: the headers of SQLite, zlib, LZ4
# and zstd), demo (make demo: also the sqlite3 shell) or test (make test,
# the default: also Tcl, Python, procps, node and npm). As root it installs
# the missing ones; otherwise it prints the one command to run as root and
# fails. A C compiler and make are assumed. node and npm are looked for as
# commands, as they often come from elsewhere than Debian (NodeSource);
# Debian's nodejs and npm are installed when either is missing.

level=${1:-test}
build="libsqlite3-dev zlib1g-dev liblz4-dev libzstd-dev"
demo="$build sqlite3"
tests="$demo libsqlite3-tcl tcl pkgconf procps python3 python3-venv python3-pip python3-setuptools python3-wheel"
case $level in
  build) packages=$build ;;
  demo) packages=$demo ;;
  test) packages=$tests ;;
  *)
    echo "usage: $0 [build|demo|test]" >&2
    exit 2
    ;;
esac

for tool in cc make; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "deps.sh: $tool is not installed (on Debian, as root: apt-get install build-essential)" >&2
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
if [ "$level" = test ]; then
  command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || missing="$missing nodejs npm"
fi
missing=${missing# }
[ -z "$missing" ] && exit 0

install="apt-get update && apt-get install -y $missing"
if [ "$(id -u)" -eq 0 ]; then
  echo "deps.sh: installing $missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update && apt-get install -y $missing
  exit $?
fi

echo "deps.sh: missing Debian packages: $missing" >&2
echo "deps.sh: install them as root: su -c '$install'" >&2
exit 1
