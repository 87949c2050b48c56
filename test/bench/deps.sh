#!/bin/sh
#
# deps.sh: gnuplot for make bench's chart. As root it installs Debian's
# gnuplot-nox when missing; otherwise it says how and the bench runs without
# the chart.

command -v gnuplot >/dev/null 2>&1 && exit 0
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" -eq 0 ]; then
  echo "bench/deps.sh: installing gnuplot-nox"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update && apt-get install -y gnuplot-nox && exit 0
fi
echo "bench/deps.sh: gnuplot is missing (Debian: apt-get install gnuplot-nox): no chart" >&2
exit 0
