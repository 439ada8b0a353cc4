#!/bin/bash
# Checks a podvisor binary against the dependencies the packages declare (Cargo.toml):
# - the newest GLIBC_x.y symbol version it needs is covered by `libc6 (>= ...)` (deb) and
#   `libc.so.6(GLIBC_...)` (rpm);
# - the shared libraries it needs are libc and libm (libc6 / glibc), libgcc_s (libgcc-s1 /
#   libgcc) and libseccomp (and the dynamic loader): a new one means a new dependency to
#   declare.
# readelf reads any architecture's ELF, so cross-built binaries are checked on the host.
# Usage: packaging/check-depends.sh BINARY
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$1
need=$(readelf -V -W "$bin" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n1)
deb=$(sed -n 's/^depends = ".*libc6 (>= \([0-9.]*\)).*/\1/p' Cargo.toml)
rpm=$(sed -n 's/^"libc.so.6(GLIBC_\([0-9.]*\))(64bit)" = .*/\1/p' Cargo.toml)
fail=0
for declared in "$deb" "$rpm"; do
  if [ -z "$declared" ] || [ "$(printf '%s\n%s\n' "$need" "$declared" | sort -V | tail -n1)" != "$declared" ]; then
    echo "check-depends: $bin needs glibc $need, Cargo.toml declares '${declared:-nothing}'" >&2
    fail=1
  fi
done
libs=$(readelf -d -W "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | grep -v '^ld-linux' | sort | tr '\n' ' ')
case "$libs" in
  "libc.so.6 libgcc_s.so.1 libm.so.6 libseccomp.so.2 " | "libc.so.6 libgcc_s.so.1 libseccomp.so.2 ") ;;
  *) echo "check-depends: $bin needs $libs: declare the new ones in Cargo.toml" >&2; fail=1 ;;
esac
[ "$fail" -eq 0 ] && echo "check-depends: $bin: glibc >= $need, $libs"
exit "$fail"
