# Moving rotated files out of the way.

# shift_logs LOG KEEP
# Make room for a new LOG.1: LOG.KEEP (the oldest) is deleted, then every
# existing LOG.i (i = 1 .. KEEP-1) becomes LOG.(i+1).  Missing numbers are
# simply skipped; no file content may be lost except LOG.KEEP's.
shift_logs() {
    local log=$1 keep=$2 i
    rm -f -- "$log.$keep"
    for ((i = 1; i < keep; i++)); do
        if [ -e "$log.$i" ]; then
            mv -f -- "$log.$i" "$log.$((i + 1))"
        fi
    done
}
