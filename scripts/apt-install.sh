# Sourced by scripts/install-services.sh and scripts/install.d/*.sh (not run by itself).
# apt_install TAG PKG...: install the Debian packages given (none: nothing to do),
# quietly, with sudo unless already root. TAG names the caller in the one line printed.
apt_install() {
  local tag=$1; shift
  [ $# -gt 0 ] || return 0
  # callers add a package once per missing command (prometheus for prometheus and promtool): once each here
  set -- $(printf '%s\n' "$@" | awk '!seen[$0]++')
  echo "$tag: apt-get install $*"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
