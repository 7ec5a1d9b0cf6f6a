# Naming helpers for backup-name.sh.

# stem PATH
# Print the name used for backups of PATH: its last path component (trailing
# slashes ignored) without its last extension.
#   /srv/www/     -> www
#   notes.v2.txt  -> notes.v2
#   Makefile      -> Makefile
#   .profile      -> .profile   (a leading dot is not an extension)
stem() {
    local p=$1
    while [ "${#p}" -gt 1 ] && [ "${p%/}" != "$p" ]; do
        p=${p%/}
    done
    p=${p##*/}
    case $p in
        ?*.*) p=${p%%.*} ;;
    esac
    printf '%s\n' "$p"
}
