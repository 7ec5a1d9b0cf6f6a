#!/bin/sh
# Keep the last 7 backups
ls -1t /backup/*.tar.gz | tail -n +8 | xargs -r rm --
