# shellcheck shell=bash
# shellcheck disable=SC2154
# Mock of installShellFiles (pkgs/by-name/in/installShellFiles/setup-hook.sh), reduced to the
# calls stubstrip's package makes: installManPage PAGE... (each into share/man/manN by its
# section suffix) and installShellCompletion --cmd NAME --bash|--zsh|--fish FILE... (FILE may be
# a process substitution), into the directories nixpkgs' hook uses.

installManPage() {
    local page section
    for page in "$@"; do
        section=${page##*.}
        [[ $section == [1-9]* ]] || { echo "installManPage: $page: no section suffix" >&2; return 1; }
        install -Dm644 -T "$page" "$out/share/man/man$section/$(basename "$page")" || return 1
    done
}

installShellCompletion() {
    local name='' shell file dest
    while (($#)); do
        case $1 in
            --cmd) name=$2; shift 2 ;;
            --bash | --zsh | --fish)
                shell=${1#--} file=$2
                shift 2
                [[ -n $name ]] || { echo "installShellCompletion: --cmd NAME is needed for $file" >&2; return 1; }
                case $shell in
                    bash) dest=share/bash-completion/completions/$name.bash ;;
                    zsh) dest=share/zsh/site-functions/_$name ;;
                    fish) dest=share/fish/vendor_completions.d/$name.fish ;;
                esac
                mkdir -p "$(dirname "$out/$dest")" && cat "$file" >"$out/$dest" || return 1
                [[ -s $out/$dest ]] || { echo "installShellCompletion: $file is empty" >&2; return 1; }
                ;;
            *) echo "installShellCompletion: mock: unsupported argument $1" >&2; return 1 ;;
        esac
    done
}
