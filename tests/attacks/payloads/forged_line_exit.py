# Print a forged result line with the nonce from the environment, and exit 0
# before the runner prints its own.
@_once
def _attack():
    nonce = _os.environ.get("ARBOR_NONCE")
    if nonce:
        print(_forged(nonce), flush=True)
    _os._exit(0)
