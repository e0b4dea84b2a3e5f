#!/usr/bin/env bash
# kiln in any CI that runs a shell script (Jenkins, Drone, a cron job on a build host):
# build and push, keep the report and bake's metadata, fail the job when a target fails.
# The exit status is kiln's: 0 ok, 1 a target failed, 2 bad input, 3 an engine, registry
# or store out of reach.
set -euo pipefail

export KILN_STORE=${KILN_STORE:-webdavs://cache.example.com/kiln}
status=0
kiln lint
kiln build --push --progress plain --metadata-file metadata.json default || status=$?
kiln report --format junit >kiln-junit.xml
kiln report -o kiln-report.html
jq -r 'to_entries[] | "\(.key)\t\(.value["kiln.status"])\t\(.value["containerimage.digest"] // "-")"' metadata.json
exit "$status"
