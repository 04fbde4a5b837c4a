#!/usr/bin/env bash
# Install the Debian packages whose files the real-corpus tests read (root, Debian/Ubuntu):
# fortune cookies (Usenet signatures with Message-IDs and addresses) and the xmlsec1 examples
# (a real RSA private key, certificates, XML signatures). The package changelogs and copyright
# files under /usr/share/doc come with every installed package. Without them those tests skip.
set -euo pipefail
if ! command -v apt-get >/dev/null 2>&1; then
  echo "corpora: no apt-get here; the real-corpus tests will skip" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends fortunes libxmlsec1-dev >/dev/null \
  || { apt-get update >/dev/null && apt-get install -y --no-install-recommends fortunes libxmlsec1-dev >/dev/null; }
