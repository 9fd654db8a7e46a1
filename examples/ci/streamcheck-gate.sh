#!/usr/bin/env sh
# The CI gate for a streaming client: run the conformance suite, keep the evidence as a
# certification bundle (JSON and HTML reports, badge, manifest) plus JUnit XML, then let
# `verify --require-conformant` decide. docs/ci.md shows it in GitHub Actions and GitLab
# CI; the kit's own CI runs this file from its wheel.
#
#   sh streamcheck-gate.sh TARGET [PYTEST OPTION ...]
#
# STREAMCHECK_OUT (default: streamcheck-out) is where everything lands; it must not
# hold an earlier bundle. Exit status: 0 only when the run passed and the bundle shows
# a conformant client (the whole catalog, every applicable case judged, none failed).
set -u
if [ "$#" -lt 1 ]; then
    echo "usage: sh streamcheck-gate.sh TARGET [PYTEST OPTION ...]" >&2
    exit 2
fi
target="$1"
shift
out="${STREAMCHECK_OUT:-streamcheck-out}"
python="${PYTHON:-python}"
mkdir -p "$out"

"$python" -m pytest -p no:cacheprovider -q --streamcheck="$target" \
    --streamcheck-certify="$out/bundle" --junitxml="$out/junit.xml" "$@"
run=$?
"$python" -m pytest_streamcheck verify "$out/bundle" --require-conformant
verdict=$?
if [ "$run" -ne 0 ]; then
    echo "streamcheck gate: the run failed (pytest exit status $run)" >&2
    exit "$run"
fi
exit "$verdict"
