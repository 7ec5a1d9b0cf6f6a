#!/bin/bash
# rotate.sh [-k KEEP] [-m MINBYTES] LOGFILE...
#
# Rotate each LOGFILE: LOG.(KEEP-1) -> LOG.KEEP, ..., LOG.1 -> LOG.2,
# LOG -> LOG.1, then a new empty LOG is created and "rotated LOG" is printed.
# At most KEEP rotated files are kept (default 5).  With -m, a LOGFILE smaller
# than MINBYTES bytes is left alone and "skip LOG" is printed instead.
# Exit status 2 on bad options, no LOGFILE, or a LOGFILE that does not exist
# (then nothing at all is rotated).
here=$(dirname "$0")
. "$here/lib/opts.sh"
. "$here/lib/shift.sh"

parse_opts "$@" || exit 2
shift $((OPTIND - 1))
if [ $# -eq 0 ]; then
    echo "usage: rotate.sh [-k KEEP] [-m MINBYTES] LOGFILE..." >&2
    exit 2
fi
for log in "$@"; do
    if [ ! -f "$log" ]; then
        echo "rotate: $log: no such file" >&2
        exit 2
    fi
done
for log in "$@"; do
    size=$(wc -c < "$log")
    if [ "$size" -lt "$MINBYTES" ]; then
        echo "skip $log"
        continue
    fi
    shift_logs "$log" "$KEEP"
    mv -f -- "$log" "$log.1"
    : > "$log"
    echo "rotated $log"
done
