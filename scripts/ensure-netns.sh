#!/usr/bin/env bash
# make chaos-partitions runs each NATS node in a network namespace of its
# own and cuts the network between them with nftables rules: it needs
# root, `ip` (iproute2) and `nft` (nftables). Install the packages that are
# missing from Debian's archive.
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
  echo "make chaos-partitions needs root: it creates network namespaces" >&2
  exit 1
fi
missing=()
command -v ip >/dev/null || missing+=(iproute2)
command -v nft >/dev/null || missing+=(nftables)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} for make chaos-partitions" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
