#!/usr/bin/env bash
# tests/fresh-debian/run.sh: the README's two commands on a fresh Debian, without pyenv.
#
#   tests/fresh-debian/run.sh [--prepare-only] [COMMAND...]
#
# As root: debootstraps a minimal Debian of this machine's release (from the mirror apt uses here)
# into $FRESH_DEBIAN_DIR (default /var/tmp/stubstrip-fresh-debian), clones this repository's
# HEAD into it (/src: what a fresh clone sees, git-tracked files only), and there, as root in a
# chroot, runs the README's two commands:
#
#   bash examples/demo.sh
#   bash tests/run-all.sh
#
# (or COMMAND..., run with bash -c in /src). The chroot's Python is Debian's own python3, which
# refuses pip installs (PEP 668): run-all.sh must put its PyPI tools into its virtual environment.
# Each command's wall time and exit status are printed at the end and written, with the full
# logs, to $FRESH_DEBIAN_DIR.log/.
#
# What the chroot gets from this machine, because a fresh Debian machine would have it another way:
#   - the Rust toolchain (rustup's, read-only bind mount of RUSTUP_HOME and the rustup proxies;
#     the README asks for cargo from rustup, and Debian's cargo is older than rust-version);
#   - this machine's extra CA certificates (/usr/local/share/ca-certificates), /etc/resolv.conf
#     and the apt sources, so that apt, pip and cargo reach the network the way they do here;
#   - /proc, /sys (bind), and a private /dev with its own device nodes, never the machine's /dev.
# --prepare-only builds the chroot and stops. FRESH=1 removes an existing chroot first.
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
[[ $(id -u) == 0 ]] || die "run as root (debootstrap, chroot, mount)"
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

apt=(apt-get -o DPkg::Lock::Timeout=600 -y -qq --no-install-recommends)
command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive "${apt[@]}" install debootstrap >/dev/null ||
  die "cannot install debootstrap"

mounted=()
# shellcheck disable=SC2317 # called by the trap
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null; done
}
trap cleanup EXIT
bindMount() { # HOSTPATH CHROOTPATH [ro]
  mkdir -p "$2" || die "cannot create $2"
  mount --bind "$1" "$2" || die "cannot bind-mount $1 on $2"
  mounted+=("$2")
  if [[ ${3-} == ro ]]; then mount -o remount,bind,ro "$2" || die "cannot make $2 read-only"; fi
}

mkdir -p "$LOGS"
if [[ ${FRESH-} == 1 && -d $DIR ]]; then
  rm -rf --one-file-system "$DIR" || die "cannot remove $DIR"
fi
start=$SECONDS
if [[ ! -x $DIR/usr/bin/apt-get ]]; then
  echo "fresh-debian: debootstrap $suite from $mirror into $DIR"
  debootstrap --variant=minbase --include=ca-certificates,git "$suite" "$DIR" "$mirror" >"$LOGS/debootstrap.log" 2>&1 ||
    die "debootstrap failed (tail of $LOGS/debootstrap.log):$(tail -5 "$LOGS/debootstrap.log")"
fi
echo "fresh-debian: chroot ready in $((SECONDS - start)) s"
cp /etc/resolv.conf "$DIR/etc/resolv.conf"
if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
  cp /etc/apt/sources.list.d/debian.sources "$DIR/etc/apt/sources.list.d/debian.sources"
  rm -f "$DIR/etc/apt/sources.list"
fi
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$DIR/usr/local/share/ca-certificates/"
  chroot "$DIR" update-ca-certificates >/dev/null 2>&1 || die "update-ca-certificates failed in the chroot"
fi
[[ ! -e $DIR/root/.pyenv ]] || die "the chroot has pyenv"

# A fresh clone of HEAD: what CI's fresh clone sees.
rm -rf "$DIR/src"
git clone -q --no-hardlinks "$ROOT" "$DIR/src" || die "git clone failed"
echo "fresh-debian: /src is $(git -C "$DIR/src" log -1 --format='%h %s')"
((prepareOnly)) && exit 0

bindMount /proc "$DIR/proc"
bindMount /sys "$DIR/sys"
# A private /dev: nodes of its own, so nothing run inside can replace the machine's.
mkdir -p "$DIR/dev" || die "cannot create $DIR/dev"
mount -t tmpfs -o mode=755 devfs "$DIR/dev" || die "cannot mount a tmpfs on $DIR/dev"
mounted+=("$DIR/dev")
for n in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9" "tty 5 0"; do
  read -r name major minor <<<"$n"
  mknod -m 666 "$DIR/dev/$name" c "$major" "$minor" || die "mknod $name"
done
mkdir -p "$DIR/dev/pts" "$DIR/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$DIR/dev/pts" && mounted+=("$DIR/dev/pts")
ln -sf pts/ptmx "$DIR/dev/ptmx"
mount -t tmpfs shm "$DIR/dev/shm" && mounted+=("$DIR/dev/shm")
ln -sf /proc/self/fd "$DIR/dev/fd"
bindMount "$RUSTUP_HOME" "$DIR/opt/rustup" ro
bindMount "$CARGO_BIN" "$DIR/opt/rustup-bin" ro

status=0
summary=()
for cmd in "${commands[@]}"; do
  log=$LOGS/$(tr -c 'a-zA-Z0-9.\n' '_' <<<"$cmd" | head -c 60).log
  echo "fresh-debian: running '$cmd' (log: $log)"
  t0=$SECONDS
  # A clean environment: no pyenv, no host PATH; cargo from rustup, CARGO_HOME the chroot's own.
  env -i HOME=/root TERM=dumb LANG=C.UTF-8 RUSTUP_HOME=/opt/rustup RUSTUP_AUTO_INSTALL=0 \
    CARGO_HOME=/root/.cargo PATH=/root/.cargo/bin:/opt/rustup-bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    chroot "$DIR" bash -c "cd /src && $cmd" >"$log" 2>&1
  rc=$?
  ((rc == 0)) || status=1
  summary+=("$(printf '%-26s exit %-3s %4d s' "$cmd" "$rc" $((SECONDS - t0)))")
  tail -25 "$log"
done
echo
echo "fresh-debian: Debian $VERSION_ID ($suite), $(nproc) cores, $(date -u +%FT%TZ), $(git -C "$DIR/src" log -1 --format=%h)"
printf '%s\n' "${summary[@]}" | tee "$LOGS/summary.txt"
exit "$status"
