# Option parsing for rotate.sh.

# parse_opts ARGS...
# Set KEEP (-k, default 5) and MINBYTES (-m, default 0) from the options in
# ARGS and leave OPTIND at the first non-option argument.  Returns 1 (after a
# message on stderr) for an unknown option, a missing option value or a value
# that is not a number (KEEP must be at least 1).
parse_opts() {
    KEEP=5
    MINBYTES=0
    OPTIND=1
    local opt
    while getopts "k:m" opt; do
        case $opt in
            k) KEEP=$OPTARG ;;
            m) MINBYTES=$OPTARG ;;
            *) echo "usage: rotate.sh [-k KEEP] [-m MINBYTES] LOGFILE..." >&2; return 1 ;;
        esac
    done
    case $KEEP in
        '' | *[!0-9]* | 0 | 00*) echo "rotate: bad KEEP: '$KEEP'" >&2; return 1 ;;
    esac
    case $MINBYTES in
        '' | *[!0-9]*) echo "rotate: bad MINBYTES: '$MINBYTES'" >&2; return 1 ;;
    esac
    return 0
}
