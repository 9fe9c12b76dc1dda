#!/usr/bin/env bash
# The Debian packages the tests use beyond Python's, each installing a command of its name
# (iproute2's is ip):
# - curl and jq: the documented curl session (docs/protocol.md) is run by a test
# - faketime: the clock tests (tests/service/test_clock.py) run services with their clocks set
#   off by libfaketime
# - chromium: the pages' tests (tests/browser) drive Debian's Chromium through Playwright
# - nginx: deploy/nginx/ is checked by nginx -t and run in front of a gateway
#   (tests/gateway/test_nginx.py)
# - iproute2: the network tests (tests/netns) give Redis and the services network namespaces
#   of their own with ip netns, veth pairs and a bridge
# Installs the missing ones as root with apt (after one apt-get update); elsewhere stops at
# once with the command to run. Prints nothing when every one is there.
set -euo pipefail
missing=()
for package in jq curl faketime chromium nginx iproute2; do
  command=${package/iproute2/ip}
  if ! command -v "$command" >/dev/null && ! test -x "/usr/sbin/$command"; then
    missing+=("$package")
  fi
done
((${#missing[@]})) || exit 0
if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
  echo "installing the system packages the tests use: ${missing[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  exit 0
fi
echo "the tests need system packages this machine lacks: ${missing[*]}" >&2
echo "install them, then run make test again:  sudo apt-get install -y ${missing[*]}" >&2
exit 1
