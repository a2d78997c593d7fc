#!/usr/bin/env bash
# Installs the real local node's runtime from Debian: containerd, runc, the
# CNI plugins (bridge, host-local, portmap, loopback) and iptables (kube-proxy
# and the bridge plugin's masquerading). Pinned to what Debian 12 ships (the
# versions the recipe in docs/architecture.md was verified with); anything
# else is refused, since containerd 1.7+/2.x and Kubernetes 1.37's node
# recipe are not known to agree here. A machine that has them costs nothing.
# Needs root (the node itself does too).
set -euo pipefail

# package -> version prefix Debian 12 (bookworm) ships
declare -A want=(
  [containerd]=1.6.
  [runc]=1.1.
  [containernetworking-plugins]=1.1.
  [iptables]=1.8.
  [busybox-static]=1:1.35.
)

installed() {
  dpkg-query -W -f='${Status} ${Version}\n' "$1" 2>/dev/null | awk '$3=="installed"{print $4}'
}

missing=()
for p in "${!want[@]}"; do
  [[ -n $(installed "$p") ]] || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "the real node needs root and these Debian packages: ${missing[*]}" >&2
    exit 1
  fi
  echo "installing ${missing[*]} from Debian (once per machine)" >&2
  install=(apt-get install -y --no-install-recommends "${missing[@]}")
  # A fresh machine may have no package lists yet; update only then.
  if ! DEBIAN_FRONTEND=noninteractive "${install[@]}" >&2; then
    apt-get update >&2
    DEBIAN_FRONTEND=noninteractive "${install[@]}" >&2
  fi
fi
for p in "${!want[@]}"; do
  v=$(installed "$p")
  if [[ $v != "${want[$p]}"* ]]; then
    echo "$p $v is installed; the node recipe is pinned to ${want[$p]}x (Debian 12)" >&2
    exit 1
  fi
done
# Debian starts containerd as a service on install; the node runs its own
# containerd with its own config, sockets and directories, so the packaged
# one is stopped and kept from starting (it would hold /run/containerd).
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet containerd 2>/dev/null; then
  systemctl disable --now containerd >&2 || true
fi
