# shellcheck shell=bash
# Mock of pkgs/by-name/ad/addDriverRunpath/setup-hook.sh: addDriverRunpath
# FILE... prepends @driverLink@/lib to each file's RUNPATH.
addDriverRunpath() {
    local file runpath
    for file in "$@"; do
        isELF "$file" || continue
        runpath=$(patchelf --print-rpath "$file")
        patchelf --set-rpath "@driverLink@/lib${runpath:+:$runpath}" "$file"
    done
}
