#!/usr/bin/env bash
# sandbox.sh PARENT_MNT_NS PRIVATE_TMP CMD...
#
# Runs CMD with a private /dev and /tmp, and exits 99 if CMD replaced the private /dev/null. The caller has already made a new mount namespace
# (`unshare -m --propagation private`); PARENT_MNT_NS is the caller's own namespace
# (readlink /proc/self/ns/mnt), so that a call outside unshare refuses instead of mounting over the
# machine's /dev. patchelf's invalid-elf.sh writes `--output /dev/null`; a tool that renames a
# temporary file over its output would otherwise replace the machine's /dev/null, and
# its temporary file would land in the machine's /dev.
set -euo pipefail

parentNs=$1
privateTmp=$2
shift 2

[[ $(readlink /proc/self/ns/mnt) != "$parentNs" ]] || {
  echo "sandbox.sh: not in a private mount namespace; refusing to mount over /dev" >&2
  exit 2
}

# A tmpfs over /dev, holding only nodes made here: what the tested tool does to them stays in this
# namespace and dies with it.
mount -t tmpfs -o mode=755,size=64m stubstrip-dev /dev
mknod -m 666 /dev/null c 1 3
mknod -m 666 /dev/zero c 1 5
mknod -m 666 /dev/full c 1 7
mknod -m 666 /dev/random c 1 8
mknod -m 666 /dev/urandom c 1 9
ln -s /proc/self/fd /dev/fd
ln -s /proc/self/fd/0 /dev/stdin
ln -s /proc/self/fd/1 /dev/stdout
ln -s /proc/self/fd/2 /dev/stderr
mkdir -m 1777 /dev/shm
# A pseudo-terminal instance of its own, for zsh-completion.sh's zpty (without one that test fails
# with both tools, and no other test needs it).
mkdir /dev/pts
if mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 stubstrip-pts /dev/pts; then
  ln -s pts/ptmx /dev/ptmx
else
  echo "sandbox.sh: could not mount a devpts instance" >&2
fi

# /tmp: a tmpfs too, unless the work lies under /tmp (mounting over it would hide the tree); the
# tests that need a temporary directory honour TMPDIR, which points into the work directory.
mkdir -p "$privateTmp"
export TMPDIR=$privateTmp
case $(pwd -P)/ in
/tmp/*) ;;
*) mount -t tmpfs -o mode=1777,size=512m stubstrip-tmp /tmp ;;
esac

# Run it, then look at /dev/null: a tool that replaced it with a file is reported (status 99,
# automake's ERROR) even when the test itself passed.
status=0
"$@" || status=$?
if [[ ! -c /dev/null ]]; then
  echo "sandbox.sh: /dev/null is no longer a character device after the test: $(ls -l /dev/null)" >&2
  exit 99
fi
exit "$status"
