#!/usr/bin/env bash
# tools/fetch_debs.sh: download (apt-get download, no install, no root needed) the Debian
# packages zinf builds against -- the -dev packages and the shared libraries they name --
# into .deb/ at the top of the checkout (ignored by git), for a machine without network
# access: tools/gpu_check.sh extracts them into $ZINF_DEPS_PREFIX there. See docs/build.md.
#   tools/fetch_debs.sh [DIR]     DIR defaults to .deb
# Run `apt-get update` first if apt-get cannot find a package.
set -euo pipefail

cd "$(dirname "$0")/.."
dir=${1:-.deb}
# Build-time: headers, .so links and .pc files; run-time: the libraries themselves
# (OpenBLAS: the pthread variant, which gpu_check.sh links in place of the alternatives).
packages=(
	pkg-config pkgconf pkgconf-bin libpkgconf3
	liburing-dev liburing2
	libaio-dev libaio1
	libhwloc-dev libhwloc15 libudev1 libnuma-dev libnuma1 libltdl-dev libltdl7
	libcjson-dev libcjson1
	libopenblas-dev libopenblas-pthread-dev libopenblas0 libopenblas0-pthread libgfortran5
	libquadmath0
)

mkdir -p "$dir"
cd "$dir"
for p in "${packages[@]}"; do
	if ! ls "${p}"_*.deb >/dev/null 2>&1; then
		apt-get download "$p" >/dev/null 2>&1 ||
			{ echo "fetch_debs: apt-get download $p failed (try apt-get update)" >&2; exit 1; }
	fi
done
echo "fetch_debs: ${#packages[@]} packages in $(pwd):"
ls -1 ./*.deb | sed 's|^\./|  |'
