#!/bin/sh
# Cross-architecture editor test suite; see README.md.  All arguments go to run.py.
exec python3 "$(dirname "$0")/run.py" "$@"
