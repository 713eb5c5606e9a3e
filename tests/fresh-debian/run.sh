#!/usr/bin/env bash
# tests/fresh-debian/run.sh: the README's two commands on a fresh Debian, without pyenv, in a container.
#
#   tests/fresh-debian/run.sh [--prepare-only] [COMMAND...]
#
# As root: debootstraps a minimal Debian of this machine's release (from the mirror apt uses here)
# into $FRESH_DEBIAN_DIR (default /var/tmp/stubstrip-fresh-debian), clones this repository's
# HEAD into it (/src: what a fresh clone sees, git-tracked files only), and there, as root in a
# container, runs the README's two commands:
#
#   bash examples/demo.sh
#   bash tests/run-all.sh
#
# (or COMMAND..., run with bash -c in /src), each in a container of its own on the same root file
# system (what one command installs, the next one finds, as on a machine). The container is
# `unshare --mount --pid --fork --uts --ipc` with private mounts: the root file system bound onto
# itself and made the root with pivot_root (the machine's root then unmounted), a fresh /proc of
# its own pid namespace, /sys read-only, a private /dev. Not a chroot: the kernel refuses a user
# namespace (CLONE_NEWUSER) to a chrooted process, and Nix's sandboxed builds (the `nix` suite)
# need one; each container first checks that `unshare --user` works inside and fails, by name,
# if it does not. The network namespace is the machine's.
# The container's Python is Debian's own python3, which refuses pip installs (PEP 668): run-all.sh
# must put its PyPI tools into its virtual environment. Each command's wall time and exit status
# are printed at the end and written, with the full logs, to $FRESH_DEBIAN_DIR.log/.
#
# What the container gets from this machine, because a fresh Debian machine would have it another way:
#   - the Rust toolchain (rustup's, read-only bind mount of RUSTUP_HOME and the rustup proxies;
#     the README asks for cargo from rustup, and Debian's cargo is older than rust-version);
#   - this machine's extra CA certificates (/usr/local/share/ca-certificates), /etc/resolv.conf
#     and the apt sources (copied), so that apt, pip and cargo reach the network the way they do here.
# /dev is a tmpfs with device nodes of its own (null zero full random urandom tty, a new devpts
# instance for ptmx, a tmpfs /dev/shm), never the machine's /dev. The root file system stays in
# $FRESH_DEBIAN_DIR for the next run (debootstrap takes minutes); FRESH=1 removes it first, and
# `rm -rf --one-file-system $FRESH_DEBIAN_DIR` removes it (nothing stays mounted: every mount is
# in the container's mount namespace, gone with it). --prepare-only builds it and stops.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DIR=${FRESH_DEBIAN_DIR:-/var/tmp/stubstrip-fresh-debian}
LOGS=$DIR.log
RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup}
CARGO_BIN=${CARGO_HOME:-$HOME/.cargo}/bin

die() {
  echo "fresh-debian: $*" >&2
  exit 2
}
[[ $(id -u) == 0 ]] || die "run as root (debootstrap, unshare, mount, pivot_root)"
[[ -d $RUSTUP_HOME/toolchains && -x $CARGO_BIN/cargo ]] || die "needs rustup's toolchain ($RUSTUP_HOME, $CARGO_BIN/cargo)"
prepareOnly=0
if [[ ${1-} == --prepare-only ]]; then
  prepareOnly=1
  shift
fi
commands=("$@")
((${#commands[@]})) || commands=("bash examples/demo.sh" "bash tests/run-all.sh")

# This machine's release and mirror.
# shellcheck source=/dev/null
. /etc/os-release
suite=${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}
mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
[[ -n $mirror ]] || mirror=$(awk '$1 == "deb" { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
[[ -n $mirror ]] || mirror=http://deb.debian.org/debian

# What this script runs on the machine, by command, and the Debian package that has it.
apt=(apt-get -o DPkg::Lock::Timeout=600 -y -qq --no-install-recommends)
needs=(debootstrap:debootstrap git:git unshare:util-linux pivot_root:util-linux mount:mount umount:mount
  mknod:coreutils)
missing=()
for n in "${needs[@]}"; do command -v "${n%%:*}" >/dev/null || missing+=("${n#*:}"); done
if ((${#missing[@]})); then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  echo "fresh-debian: installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install "${missing[@]}" >/dev/null ||
    die "apt-get could not install ${missing[*]}"
fi
for n in "${needs[@]}"; do command -v "${n%%:*}" >/dev/null || die "missing ${n%%:*} (Debian package ${n#*:})"; done

# Runs in the new namespaces as their pid 1, on the machine's root: builds the container's
# mounts on $1, pivots into it, checks user namespaces, and execs `bash -c "cd /src && $2"`
# with a clean environment. Every mount belongs to this mount namespace and dies with it.
# shellcheck disable=SC2317 # called through bash -c in the new namespaces
containerInit() {
  local dir=$1 cmd=$2 n name major minor
  fail() {
    echo "fresh-debian (container): $*" >&2
    exit 2
  }
  mount --bind "$dir" "$dir" || fail "cannot bind-mount $dir onto itself"
  mount -t proc -o nosuid,nodev,noexec proc "$dir/proc" || fail "cannot mount /proc"
  mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$dir/sys" || fail "cannot mount /sys read-only"
  mount -t tmpfs -o mode=755,nosuid devfs "$dir/dev" || fail "cannot mount a tmpfs on /dev"
  for n in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9" "tty 5 0"; do
    read -r name major minor <<<"$n"
    mknod -m 666 "$dir/dev/$name" c "$major" "$minor" || fail "mknod /dev/$name"
  done
  mkdir -p "$dir/dev/pts" "$dir/dev/shm"
  mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$dir/dev/pts" || fail "cannot mount /dev/pts"
  ln -s pts/ptmx "$dir/dev/ptmx"
  mount -t tmpfs -o mode=1777,nosuid,nodev shm "$dir/dev/shm" || fail "cannot mount /dev/shm"
  ln -s /proc/self/fd "$dir/dev/fd"
  ln -s /proc/self/fd/0 "$dir/dev/stdin"
  ln -s /proc/self/fd/1 "$dir/dev/stdout"
  ln -s /proc/self/fd/2 "$dir/dev/stderr"
  for n in "$RUSTUP_HOME:opt/rustup" "$CARGO_BIN:opt/rustup-bin"; do
    mkdir -p "$dir/${n#*:}"
    mount --bind "${n%%:*}" "$dir/${n#*:}" || fail "cannot bind-mount ${n%%:*}"
    mount -o remount,bind,ro "$dir/${n#*:}" || fail "cannot make /${n#*:} read-only"
  done
  echo fresh-debian >"$dir/proc/sys/kernel/hostname" || fail "cannot set the hostname"
  mkdir -p "$dir/.old-root"
  cd "$dir" || fail "cannot enter $dir"
  pivot_root . .old-root || fail "pivot_root failed"
  cd / || fail "cannot enter the new root"
  umount -l /.old-root || fail "cannot unmount the machine's root"
  rmdir /.old-root
  # Nix's sandbox needs a user namespace; inside a chroot the kernel refuses one.
  /usr/bin/unshare --user true || fail "no user namespace inside the container (Nix's sandbox needs one)"
  # A clean environment: no pyenv, no host PATH; cargo from rustup, CARGO_HOME the container's own.
  exec /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 RUSTUP_HOME=/opt/rustup RUSTUP_AUTO_INSTALL=0 \
    CARGO_HOME=/root/.cargo PATH=/root/.cargo/bin:/opt/rustup-bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    /bin/bash -c "cd /src && $cmd"
}
inContainer() { # COMMAND: runs it with bash -c in /src of the container
  unshare --mount --pid --fork --kill-child --uts --ipc --propagation private \
    env RUSTUP_HOME="$RUSTUP_HOME" CARGO_BIN="$CARGO_BIN" \
    bash -c "$(declare -f containerInit); containerInit \"\$@\"" containerInit "$DIR" "$1"
}

mkdir -p "$LOGS"
if [[ ${FRESH-} == 1 && -d $DIR ]]; then
  rm -rf --one-file-system "$DIR" || die "cannot remove $DIR"
fi
start=$SECONDS
if [[ ! -x $DIR/usr/bin/apt-get ]]; then
  echo "fresh-debian: debootstrap $suite from $mirror into $DIR"
  debootstrap --variant=minbase --include=ca-certificates,git,util-linux "$suite" "$DIR" "$mirror" >"$LOGS/debootstrap.log" 2>&1 ||
    die "debootstrap failed (tail of $LOGS/debootstrap.log):$(tail -5 "$LOGS/debootstrap.log")"
fi
echo "fresh-debian: root file system ready in $((SECONDS - start)) s"
[[ -x $DIR/usr/bin/unshare ]] || die "$DIR has no /usr/bin/unshare (util-linux)"
cp /etc/resolv.conf "$DIR/etc/resolv.conf"
if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
  cp /etc/apt/sources.list.d/debian.sources "$DIR/etc/apt/sources.list.d/debian.sources"
  rm -f "$DIR/etc/apt/sources.list"
fi
[[ ! -e $DIR/root/.pyenv ]] || die "the root file system has pyenv"

# A fresh clone of HEAD: what CI's fresh clone sees.
rm -rf "$DIR/src"
git clone -q --no-hardlinks "$ROOT" "$DIR/src" || die "git clone failed"
echo "fresh-debian: /src is $(git -C "$DIR/src" log -1 --format='%h %s')"
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$DIR/usr/local/share/ca-certificates/"
  inContainer "update-ca-certificates >/dev/null 2>&1" || die "update-ca-certificates failed in the container"
fi
((prepareOnly)) && exit 0

status=0
summary=()
for cmd in "${commands[@]}"; do
  log=$LOGS/$(tr -c 'a-zA-Z0-9.\n' '_' <<<"$cmd" | head -c 60).log
  echo "fresh-debian: running '$cmd' (log: $log)"
  t0=$SECONDS
  inContainer "$cmd" >"$log" 2>&1
  rc=$?
  ((rc == 0)) || status=1
  summary+=("$(printf '%-26s exit %-3s %4d s' "$cmd" "$rc" $((SECONDS - t0)))")
  tail -25 "$log"
done
echo
echo "fresh-debian: Debian $VERSION_ID ($suite), $(nproc) cores, $(date -u +%FT%TZ), $(git -C "$DIR/src" log -1 --format=%h), load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%s\n' "${summary[@]}" | tee "$LOGS/summary.txt"
exit "$status"
