#!/usr/bin/env bash
# Installs the Debian packages listed in tools/debian-packages.txt that are
# missing. Fast (no apt-get at all) when everything is already there.
#   tools/install-deps.sh                  every package (development, CI)
#   tools/install-deps.sh --image-build    all but those marked `test` (the
#                                          container image's build stage)
#   tools/install-deps.sh --runtime [PKG...]  those marked `runtime`, plus PKG
#                                          (the image's runtime stage)
#   --list before any of these prints the selected names instead.
# Lines marked release=N are taken only on Debian N (VERSION_ID in
# /etc/os-release, or MANYPY_DEBIAN_RELEASE); Debian 12, 13 and 14 are
# supported (testing and sid, which have no VERSION_ID, count as 14).
set -euo pipefail
list="$(dirname "$0")/debian-packages.txt"
release="${MANYPY_DEBIAN_RELEASE:-}"
if [[ -z "$release" ]]; then
  release="$(. /etc/os-release 2>/dev/null && echo "${VERSION_ID:-}")"
  if [[ -z "$release" ]]; then  # testing/sid have no VERSION_ID; name the codename's release
    case "$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")" in
      bookworm) release=12 ;;
      trixie) release=13 ;;
      forky | sid) release=14 ;;
    esac
  fi
fi
case "$release" in
  12 | 13 | 14) ;;
  *)
    echo "install-deps: Debian release '${release:-unknown}' (/etc/os-release) is not one the list supports (12, 13, 14); set MANYPY_DEBIAN_RELEASE to pick one" >&2
    exit 2
    ;;
esac
print=0
if [[ "${1:-}" == "--list" ]]; then
  print=1
  shift
fi
mode="${1:---all}"
(($# > 0)) && shift
case "$mode" in
  --all | --image-build | --runtime) ;;
  *)
    echo "usage: $0 [--list] [--all | --image-build | --runtime [PACKAGE...]]" >&2
    exit 2
    ;;
esac
[[ "$mode" != "--runtime" && $# -gt 0 ]] && { echo "install-deps: extra packages only with --runtime" >&2; exit 2; }

selected=()
skip_if_command=()
while read -r pkg words; do
  [[ -z "$pkg" || "$pkg" == \#* ]] && continue
  runtime=0 test=0 command="" only=""
  for word in $words; do
    case "$word" in
      runtime) runtime=1 ;;
      test) test=1 ;;
      release=12 | release=13 | release=14) only="${word#release=}" ;;
      command=*) command="${word#command=}" ;;
      *)
        echo "install-deps: $list: unknown word '$word' after $pkg" >&2
        exit 2
        ;;
    esac
  done
  [[ -n "$only" && "$only" != "$release" ]] && continue
  case "$mode" in
    --image-build) ((test)) && continue ;;
    --runtime) ((runtime)) || continue ;;
  esac
  selected+=("$pkg")
  skip_if_command+=("$command")
done <"$list"
for pkg in "$@"; do
  selected+=("$pkg")
  skip_if_command+=("")
done

if ((print)); then
  printf '%s\n' "${selected[@]}"
  exit 0
fi

missing=()
for i in "${!selected[@]}"; do
  pkg="${selected[$i]}"
  command="${skip_if_command[$i]}"
  if [[ -n "$command" ]] && command -v "$command" >/dev/null; then
    continue
  fi
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
if ((${#missing[@]} == 0)); then
  echo "install-deps: all Debian packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "install-deps: not root; install these packages first: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
