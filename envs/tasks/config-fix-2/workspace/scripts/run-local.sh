#!/bin/bash
# Show the settings the worker would start with.
set -a
. deploy/worker.env
set +a
for key in APP_NAME DATA_DIR OUTPUT_DIR QUEUE_URL LOG_LEVEL MAX_JOBS WORKER_TIMEOUT GREETING; do
    printf '%s=%s\n' "$key" "${!key}"
done
