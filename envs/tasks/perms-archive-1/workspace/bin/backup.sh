#!/bin/sh
# Back up data/ into /backup
tar -czf /backup/data-$(date +%F).tar.gz data
