#!/usr/bin/env bash
# Install what Sluicegate needs from Debian's packages when it is missing: Python 3.11,
# a JDK for Kafka and Spark, Maven to resolve their jars, PostgreSQL, Chromium (with its
# driver, for the console's browser test) and Prometheus (promtool) for the test suite.
set -euo pipefail

missing=()
command -v python3.11 >/dev/null || missing+=(python3.11 python3.11-venv)
command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || missing+=(maven)
if ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  missing+=(postgresql)
fi
command -v runuser >/dev/null || missing+=(util-linux)
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
command -v promtool >/dev/null || missing+=(prometheus)  # its linter checks /metrics in a test

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing from Debian's packages: ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "error: need root or sudo to install ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
