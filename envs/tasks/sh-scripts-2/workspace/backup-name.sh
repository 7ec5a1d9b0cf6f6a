#!/bin/bash
# backup-name.sh [-d YYYYMMDD] SOURCE DESTDIR
#
# Print the file name (not the path) for the next backup of SOURCE in DESTDIR:
#     <stem>-<YYYYMMDD>-<NN>.tar.gz
# <stem> comes from lib/naming.sh.  NN is a two-digit sequence number, one more
# than the highest NN already present in DESTDIR for the same stem and date
# (01 when there is none).  The date defaults to today.
# Exit status 2 on bad usage, a bad date or a missing DESTDIR.
here=$(dirname "$0")
. "$here/lib/naming.sh"

usage() {
    echo "usage: backup-name.sh [-d YYYYMMDD] SOURCE DESTDIR" >&2
    exit 2
}

date=$(date +%Y%m%d)
while getopts "d:" opt; do
    case $opt in
        d) date=$OPTARG ;;
        *) usage ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || usage
case $date in
    [0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]) ;;
    *) echo "backup-name: bad date: $date" >&2; exit 2 ;;
esac
src=$1
dest=$2
if [ ! -d "$dest" ]; then
    echo "backup-name: $dest: not a directory" >&2
    exit 2
fi
base=$(stem "$src")

count=0
for f in "$dest/$base-$date-"[0-9][0-9].tar.gz; do
    [ -e "$f" ] || continue
    count=$((count + 1))
done
printf '%s-%s-%02d.tar.gz\n' "$base" "$date" $((count + 1))
