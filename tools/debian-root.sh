#!/usr/bin/env bash
# A Debian root for building, testing and serving manypy on another Debian
# release from a Debian 12 machine (run as root). tools/debian13.sh and
# tools/debian14.sh call it with their release; use those:
#   tools/debian-root.sh RELEASE CODENAME [OPTION...] VERB [ARG...]
# with VERB one of
#   create       make the root once (debootstrap from the mirror this machine's
#                apt uses), then install or update tools/debian-packages.txt in
#                it (its release=RELEASE lines)
#   run CMD...   run CMD inside the root, in the current folder, with this
#                checkout bind-mounted at the same path
#   shell        an interactive shell there
#   path         print the root's folder
# --suite-script NAME: debootstrap's script for the codename when this
# debootstrap has none of its own (Debian 12's knows no forky: sid's works).
# --any-valid-until: apt in the root accepts a Release file past its
# Valid-Until date (Acquire::Check-Valid-Until=false): a testing suite's is a
# week, and a mirror frozen at a date serves it past that.
#   tools/debian-root.sh RELEASE CODENAME [--suite-script NAME] [--any-valid-until] VERB [ARG...]
# The root lives outside the checkout, in MANYPY_DEBIAN<RELEASE>_ROOT (default
# /var/cache/manypy/debian<RELEASE>), and is reused: `create` and `run` only
# install what the package list gained since. Mounts live in a private mount
# namespace that ends with the command, so nothing stays mounted on the host.
set -euo pipefail
# A wrapper names itself in MANYPY_ROOT_WRAPPER, for the usage line.
usage() {
  if [[ -n "${MANYPY_ROOT_WRAPPER:-}" ]]; then
    echo "usage: $MANYPY_ROOT_WRAPPER create | run COMMAND [ARG...] | shell | path" >&2
  else
    echo "usage: $0 RELEASE CODENAME [--suite-script NAME] [--any-valid-until] create | run COMMAND [ARG...] | shell | path" >&2
  fi
  exit 2
}
(($# >= 2)) || usage
release="$1" codename="$2"
shift 2
[[ "$release" =~ ^[0-9]+$ && "$codename" =~ ^[a-z]+$ ]] || usage
suite_script="$codename" any_valid_until=0
while [[ "${1:-}" == --* ]]; do
  case "$1" in
    --suite-script)
      (($# >= 2)) || usage
      suite_script="$2"
      shift 2
      ;;
    --any-valid-until)
      any_valid_until=1
      shift
      ;;
    *) usage ;;
  esac
done
name="debian$release"
root_var="MANYPY_DEBIAN${release}_ROOT"
root="${!root_var:-/var/cache/manypy/$name}"
here="$(cd "$(dirname "$0")/.." && pwd)"
list="$here/tools/debian-packages.txt"

die() {
  echo "$name: $*" >&2
  exit 1
}

# The first `URIs:` of the host's deb822 stanza for SUITE_WORD (debian or
# debian-security), so the root uses the same mirror the host's apt uses.
host_mirror() {
  local want="$1" file
  for file in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$file" ]] || continue
    awk -v want="$want" '
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) {
          sec = ($i ~ /-security$/)
          if ((want == "security") == sec && uri != "") { print uri; exit } } }
      /^$/ { uri = "" }' "$file"
  done | head -n1
}

mirror_main() {
  local uri
  uri="$(host_mirror main)"
  [[ -n "$uri" ]] || uri="$(sed -n 's/^deb \(http[^ ]*\) bookworm .*/\1/p' /etc/apt/sources.list 2>/dev/null | head -n1)"
  [[ -n "$uri" ]] || die "no Debian mirror found in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list"
  echo "$uri"
}

write_sources() {
  local main security
  main="$(mirror_main)"
  security="$(host_mirror security)"
  {
    printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates\nComponents: main\n' "$main" "$codename" "$codename"
    printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
    if [[ -n "$security" ]]; then
      printf '\nTypes: deb\nURIs: %s\nSuites: %s-security\nComponents: main\n' "$security" "$codename"
      printf 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n'
    fi
  } >"$root/etc/apt/sources.list.d/debian.sources"
  rm -f "$root/etc/apt/sources.list"
  if ((any_valid_until)); then
    echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99manypy-any-valid-until"
  fi
}

bootstrap() {
  [[ $(id -u) -eq 0 ]] || die "must run as root (debootstrap, chroot and mounts)"
  command -v debootstrap >/dev/null || die "debootstrap is missing: run tools/install-deps.sh (it is in tools/debian-packages.txt)"
  local script="/usr/share/debootstrap/scripts/$suite_script"
  [[ -f "$script" ]] || die "this debootstrap does not know $suite_script; update the debootstrap package"
  local tmp="$root.partial" start=$SECONDS log
  log="$(dirname "$root")/debootstrap-$name.log"
  rm -rf "$tmp"
  mkdir -p "$(dirname "$root")"
  echo "$name: debootstrap $codename into $root (once)"
  debootstrap --variant=minbase --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
    "$codename" "$tmp" "$(mirror_main)" "$script" >"$log" 2>&1 ||
    die "debootstrap failed; see $log"
  mv "$tmp" "$root"
  write_sources
  echo "$name: root made in $((SECONDS - start)) s"
}

# Runs "$@" in the root, in a private mount namespace with the checkout (and its
# git folder, for worktrees) at the same paths, plus /proc, /dev, /sys.
in_root() {
  local gitdir=""
  gitdir="$(git -C "$here" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)"
  cp -f /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  unshare --mount --propagation private /bin/bash -s -- "$root" "$here" "$gitdir" "$PWD" "$release" "$@" <<'EOF'
set -euo pipefail
root="$1" here="$2" gitdir="$3" cwd="$4" release="$5"
shift 5
bind() { mkdir -p "$root$2"; mount --rbind "$1" "$root$2"; }
bind /proc /proc
bind /sys /sys
bind /dev /dev
bind "$here" "$here"
if [[ -n "$gitdir" && "$gitdir" != "$here"/* ]]; then
  bind "$gitdir" "$gitdir"
  mount -o remount,bind,ro "$root$gitdir"
fi
mkdir -p "$root/tmp" && chmod 1777 "$root/tmp"
case "$cwd" in "$here" | "$here"/*) ;; *) cwd="$here" ;; esac
exec chroot "$root" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  CCACHE_DIR="${CCACHE_DIR:-/root/.ccache}" CCACHE_BASEDIR="$here" \
  NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
  "MANYPY_IN_DEBIAN$release=1" /bin/bash -c 'cd "$0" && exec "$@"' "$cwd" "$@"
EOF
}

# Installs what tools/debian-packages.txt (release=RELEASE lines) names and the root
# lacks; stamped by the list's hash so an unchanged list costs nothing.
update() {
  local stamp="$root/var/lib/manypy-packages.sha256" sum
  sum="$(sha256sum "$list" | cut -d' ' -f1)"
  [[ -f "$stamp" && "$(cat "$stamp")" == "$sum" ]] && return 0
  echo "$name: installing tools/debian-packages.txt in the root"
  in_root "$here/tools/install-deps.sh"
  echo "$sum" >"$stamp"
}

# The host's own extra CA certificates (a proxy's, say) are trusted in the
# root too, as its resolv.conf is used: copied when they change, then
# update-ca-certificates there.
sync_certificates() {
  local src=/usr/local/share/ca-certificates dst="$root/usr/local/share/ca-certificates"
  [[ -d "$src" ]] || return 0
  if ! diff -rq "$src" "$dst" >/dev/null 2>&1; then
    mkdir -p "$dst"
    rm -rf "${dst:?}"/*
    cp -a "$src"/. "$dst"/
    [[ -x "$root/usr/sbin/update-ca-certificates" ]] && in_root /usr/sbin/update-ca-certificates >/dev/null
  fi
  return 0
}

ensure() {
  [[ -d "$root/usr" ]] || bootstrap
  update
  sync_certificates
}

cmd="${1:-}"
(($# > 0)) && shift
case "$cmd" in
  create) ensure ;;
  run)
    (($# > 0)) || die "usage: ${MANYPY_ROOT_WRAPPER:-$0 $release $codename} run COMMAND [ARG...]"
    ensure
    in_root "$@"
    ;;
  shell)
    ensure
    in_root /bin/bash -i
    ;;
  path) echo "$root" ;;
  *)
    usage
    ;;
esac
