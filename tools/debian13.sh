#!/usr/bin/env bash
# A Debian 13 (trixie) root for building, testing and serving manypy on PyTorch
# 2.6 / Python 3.13 from a Debian 12 machine (run as root).
#   tools/debian13.sh create     make the root once (debootstrap from the mirror
#                                this machine's apt uses), then install or update
#                                tools/debian-packages.txt in it (release=13)
#   tools/debian13.sh run CMD... run CMD inside the root, in the current folder,
#                                with this checkout bind-mounted at the same path
#   tools/debian13.sh shell      an interactive shell there
#   tools/debian13.sh path       print the root's folder
# The root lives outside the checkout, in MANYPY_DEBIAN13_ROOT (default
# /var/cache/manypy/debian13), and is reused: `create` and `run` only install
# what the package list gained since. tools/debian-root.sh does the work.
MANYPY_ROOT_WRAPPER="$0" exec "$(dirname "$0")/debian-root.sh" 13 trixie "$@"
