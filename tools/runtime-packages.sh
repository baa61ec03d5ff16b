#!/usr/bin/env bash
# Prints the Debian packages that own FILE... (when a package does) and the
# shared libraries they link directly (DT_NEEDED, found where ldd finds them),
# one a line, sorted: the runtime counterparts of the -dev packages in
# tools/debian-packages.txt, derived from the built binaries rather than listed
# twice (apt brings the rest through their Depends). Used by
# deploy/docker/Dockerfile:
#   tools/runtime-packages.sh build/bin/manypy-server build/lib/libmanypy_shim.so
set -euo pipefail
(($# > 0)) || { echo "usage: $0 FILE..." >&2; exit 2; }

paths=()
for file in "$@"; do
  [[ -e "$file" ]] || { echo "runtime-packages: no such file $file" >&2; exit 1; }
  paths+=("$file")
  resolved="$(ldd "$file")" || { echo "runtime-packages: ldd failed on $file" >&2; exit 1; }
  for name in $(objdump -p "$file" | awk '$1 == "NEEDED" { print $2 }'); do
    path="$(awk -v n="$name" '$1 == n && $2 == "=>" { print $3 } $1 ~ ("/" n "$") { print $1 }' <<<"$resolved")"
    [[ "$path" == /* ]] || { echo "runtime-packages: $file needs $name, not found" >&2; exit 1; }
    paths+=("$path")
  done
done

# dpkg records a file under the path its package shipped it at: with merged
# /usr, /lib/x/y may be recorded as /usr/lib/x/y or the other way round, and a
# name may be a symlink (libblas.so.3 -> /etc/alternatives -> OpenBLAS).
declare -A wanted
candidates=()
for path in $(printf '%s\n' "${paths[@]}" | sort -u); do
  real="$(readlink -f "$path")"
  wanted["$path"]=1
  for c in "$path" "$real" "/usr${path}" "/usr${real}" "${path#/usr}" "${real#/usr}"; do
    candidates+=("$c")
  done
done
declare -A owner_of
while IFS= read -r line; do
  pkgs="${line%%: /*}" file="${line#*: }"
  owner_of["$file"]="$pkgs"
done < <(dpkg-query -S $(printf '%s\n' "${candidates[@]}" | sort -u) 2>/dev/null || true)

packages=()
for path in "${!wanted[@]}"; do
  real="$(readlink -f "$path")" found=""
  for c in "$path" "$real" "/usr${path}" "/usr${real}" "${path#/usr}" "${real#/usr}"; do
    [[ -n "${owner_of[$c]:-}" ]] && { found="${owner_of[$c]}"; break; }
  done
  if [[ -z "$found" ]]; then
    # The project's own files (the server, its shim) belong to no package.
    for given in "$@"; do [[ "$given" == "$path" ]] && continue 2; done
    echo "runtime-packages: no Debian package owns $path" >&2
    exit 1
  fi
  packages+=($(tr ',' ' ' <<<"$found"))
done
printf '%s\n' "${packages[@]}" | sort -u
