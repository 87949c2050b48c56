#!/bin/sh
#
# fresh_check.sh: the README's two commands on a fresh minimal Debian 12, as
# a new user types them (make fresh-check). debootstrap makes a minbase root
# of bookworm (kept under build/fresh/base and copied for each run), with
# Debian's usual /etc/hosts (localhost is ::1 as well as 127.0.0.1) and only
# build-essential, git and ca-certificates added; the repository's committed
# HEAD is cloned into it. Then, under a login's descriptor limit (1024):
#   1. as a user other than root, `make demo` and `make test` must fail and
#      print the one root command that installs what is missing;
#   2. as root, `make demo` and then `make test` must pass.
# It needs root (debootstrap, chroot, mounts) and Debian's package mirror
# (RMQ_FRESH_MIRROR, default http://deb.debian.org/debian); the Node tests
# in it fetch from the npm registry. CA certificates the host added in
# /usr/local/share/ca-certificates (a TLS proxy's) are copied into the root.
# A run takes about as long as make test; the logs are build/fresh/*.log.

set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
work=${RMQ_FRESH_DIR:-$repo/build/fresh}
mirror=${RMQ_FRESH_MIRROR:-http://deb.debian.org/debian}
base=$work/base
root=$work/root

fail() {
  echo "fresh_check.sh: $*" >&2
  exit 1
}

[ "$(id -u)" -eq 0 ] || fail "needs root (debootstrap, chroot and mounts)"
command -v debootstrap >/dev/null 2>&1 || fail "needs debootstrap (as root: apt-get install debootstrap)"

mkdir -p "$work"
if [ ! -x "$base/bin/sh" ]; then
  echo "== debootstrap --variant=minbase bookworm ($mirror)"
  rm -rf "$base"
  debootstrap --variant=minbase bookworm "$base" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    fail "debootstrap failed: see $work/debootstrap.log"
fi

unmount() {
  for m in dev sys proc; do
    if mountpoint -q "$root/$m"; then umount -R "$root/$m" || umount -lR "$root/$m"; fi
  done
}
trap unmount EXIT INT TERM
unmount
rm -rf "$root"
cp -a "$base" "$root"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
cp /etc/resolv.conf "$root/etc/resolv.conf"
cat >"$root/etc/hosts" <<'EOF'
127.0.0.1	localhost
::1		localhost ip6-localhost ip6-loopback
ff02::1		ip6-allnodes
ff02::2		ip6-allrouters
EOF

# A command in the root, with a login's environment and descriptor limit.
in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/sh -c "ulimit -Sn 1024; $1"
}

echo "== apt-get install build-essential git ca-certificates"
in_root 'export DEBIAN_FRONTEND=noninteractive; apt-get update &&
         apt-get install -y --no-install-recommends build-essential git ca-certificates' \
  >"$work/apt.log" 2>&1 || fail "apt-get failed: see $work/apt.log"
for crt in /usr/local/share/ca-certificates/*.crt; do
  [ -f "$crt" ] && cp "$crt" "$root/usr/local/share/ca-certificates/"
done
in_root 'update-ca-certificates' >>"$work/apt.log" 2>&1

git -C "$repo" bundle create "$root/repo.bundle" HEAD >/dev/null 2>&1 || fail "cannot bundle $repo"
in_root 'useradd -m newcomer && git -c advice.detachedHead=false clone -q /repo.bundle /root/repo &&
         git -c advice.detachedHead=false clone -q /repo.bundle /home/newcomer/repo && chown -R newcomer: /home/newcomer/repo' ||
  fail "cannot clone the repository into the root"

status=0
for target in demo test; do
  log=$work/user-$target.log
  echo "== make $target, as a user other than root"
  if in_root "cd /home/newcomer/repo && runuser -u newcomer -- make $target" >"$log" 2>&1; then
    echo "   passed, but it had packages to install: see $log"
    status=1
  elif grep -q "install them as root: su -c 'apt-get update && apt-get install -y" "$log"; then
    echo "   failed, naming: $(grep 'su -c' "$log" | head -n 1)"
  else
    echo "   failed without the command that installs what is missing: see $log"
    status=1
  fi
done

for target in demo test; do
  log=$work/root-$target.log
  echo "== make $target, as root"
  start=$(date +%s)
  if in_root "cd /root/repo && make $target" >"$log" 2>&1; then
    echo "   passed in $(($(date +%s) - start)) s: $(tail -n 1 "$log")"
  else
    echo "   FAILED after $(($(date +%s) - start)) s: see $log"
    tail -n 40 "$log" | sed 's/^/   /'
    status=1
    break
  fi
done

[ "$status" -eq 0 ] && echo "fresh_check.sh: the README's two commands work on a fresh Debian 12"
exit "$status"
