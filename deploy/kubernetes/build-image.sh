#!/usr/bin/env bash
# Builds the gpusched image as a tar without a Docker daemon and without pulling a base image (no registry needed):
# Jib from `scratch`, plus a layer holding a jlink'ed Java runtime of this build machine's JDK and the C libraries it
# links (read with ldd). Output: gpusched-cli/target/gpusched-image.tar (docker-archive; `podman load -i` or
# `ctr -n k8s.io images import` it). Linux x86_64/aarch64 with a JDK 17+ (jlink) and ldd.
set -euo pipefail
cd "$(dirname "$0")/../.."
java_home="${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")}"
extra=gpusched-cli/target/jib-extra
rm -rf "$extra"
mkdir -p "$extra/opt" "$extra/tmp"
# the modules gpusched's command and its libraries use (jdeps over the shaded class path names these)
"$java_home/bin/jlink" --add-modules java.base,java.logging,java.management,java.naming,java.xml,java.desktop,java.sql,jdk.unsupported,jdk.crypto.ec,java.net.http,jdk.httpserver,jdk.management,java.instrument,java.security.jgss \
  --strip-debug --no-header-files --no-man-pages --output "$extra/opt/java"
# the C libraries of the runtime and of the loader, copied from this machine where the runtime's libraries point
for lib in $(find "$extra/opt/java" -name '*.so' -o -path '*/bin/java' | xargs ldd 2>/dev/null \
    | awk '$3 ~ /^\// {print $3} $1 ~ /^\/.*ld-linux/ {print $1}' | sort -u) /lib64/ld-linux-x86-64.so.2; do
  [ -e "$lib" ] || continue
  mkdir -p "$extra$(dirname "$lib")"
  cp -L "$lib" "$extra$lib"
done
for extra_lib in /lib/x86_64-linux-gnu/libdl.so.2 /lib/x86_64-linux-gnu/libpthread.so.0 /lib/x86_64-linux-gnu/librt.so.1; do
  [ -e "$extra_lib" ] && mkdir -p "$extra$(dirname "$extra_lib")" && cp -L "$extra_lib" "$extra$extra_lib"
done
${MVN:-./mvnw} -B -q ${MVN_OFFLINE:-} -pl gpusched-cli -am -DskipTests -Dmaven.javadoc.skip=true -Dmaven.source.skip=true \
  -Pk8s-image package
ls -l gpusched-cli/target/gpusched-image.tar
