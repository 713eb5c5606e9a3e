#!/bin/bash
# stdenv's `patchelf` in the elfpatch-stdenv part (../README.md): runs @tool@ under the name it was
# called by (elfpatch answers --version as patchelf under that name), with stdout and the exit
# status untouched, and appends one line per call to $NIX_BUILD_TOP/.stubstrip-patchelf-calls:
#   STATUS <TAB> OPTIONS <TAB> LAST ARGUMENT <TAB> RUNPATH BEFORE <TAB> AFTER <TAB> STDERR'S FIRST LINE
# (the RUNPATHs, read by readelf, only for --shrink-rpath: what stdenv's shrink removed).
# ./patchelf-calls-hook.sh reports the log at the end of fixup.
log=${NIX_BUILD_TOP:+$NIX_BUILD_TOP/.stubstrip-patchelf-calls}
if [[ -z $log || -n ${STUBSTRIP_PATCHELF_NOLOG-} ]]; then
    exec -a "$0" "@tool@" "$@"
fi
opts=()
for a in "$@"; do
    [[ $a == -* ]] && opts+=("$a")
done
file=${!#}
runpath() { @readelf@ -dW "$1" 2>/dev/null | sed -n 's/.*(R\(UN\)\{0,1\}PATH).*\[\(.*\)\]$/\2/p'; }
before='' after=''
shrink=''
[[ " ${opts[*]} " == *" --shrink-rpath "* ]] && shrink=1
[[ -z $shrink ]] || before=$(runpath "$file")
err=$log.$$.err
(exec -a "$0" "@tool@" "$@") 2>"$err"
rc=$?
cat "$err" >&2
[[ -z $shrink ]] || after=$(runpath "$file")
printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$rc" "${opts[*]}" "$file" "$before" "$after" "$(head -n 1 "$err" | cut -c1-300)" >>"$log"
rm -f "$err"
exit "$rc"
