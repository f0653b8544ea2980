#!/usr/bin/env bash
# mpirun for the lit tests (%mpirun). Each job gets a private TMPDIR: Open MPI 4 races when
# concurrent jobs create its shared session directory ("mkdir ... File exists").
set -u
TMPDIR="$(mktemp -d "${TMPDIR:-/tmp}/zen-mpi.XXXXXX")" || exit 70
export TMPDIR
"${ZEN_MPIEXEC:-mpirun}" --allow-run-as-root --oversubscribe "$@"
status=$?
rm -rf "$TMPDIR"
exit $status
