#!/bin/sh
# entrypoint.sh (twin): the runtime image's entrypoint.
set -eu
echo "pytorch-run: $(pip freeze | grep '^torch==')"
rocminfo
exec "$@"
