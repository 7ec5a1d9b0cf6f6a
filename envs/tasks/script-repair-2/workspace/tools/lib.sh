# Helpers shared by the tools/ scripts.

log() { echo "[bundle] $*" >&2; }

# checksum FILE: prints "<sha256>  <file name>", the format `sha256sum -c` reads back
# when run in the file's folder.
checksum() {
    local file=$1
    (cd $(dirname $file) && sha256sum $(basename $file))
}
