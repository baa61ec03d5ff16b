#!/usr/bin/env bash
# A Debian 14 (forky, testing) root for building, testing and serving manypy on
# PyTorch 2.14 / Python 3.14 from a Debian 12 machine (run as root).
#   tools/debian14.sh create     make the root once (debootstrap from the mirror
#                                this machine's apt uses), then install or update
#                                tools/debian-packages.txt in it (release=14)
#   tools/debian14.sh run CMD... run CMD inside the root, in the current folder,
#                                with this checkout bind-mounted at the same path
#   tools/debian14.sh shell      an interactive shell there
#   tools/debian14.sh path       print the root's folder
# The root lives outside the checkout, in MANYPY_DEBIAN14_ROOT (default
# /var/cache/manypy/debian14), and is reused: `create` and `run` only install
# what the package list gained since. tools/debian-root.sh does the work.
# Debian 12's debootstrap has no forky script: sid's makes it. Testing's
# Release files are valid for a week, so apt in the root does not check that.
MANYPY_ROOT_WRAPPER="$0" exec "$(dirname "$0")/debian-root.sh" 14 forky \
  --suite-script sid --any-valid-until "$@"
