#!/usr/bin/env bash
# Builds the Flink side of Weir's Kafka benchmark (see README.md) into
#   ${XDG_CACHE_HOME:-$HOME/.cache}/weir/flink-kafka/lib/
# (the job's jar plus every runtime dependency jar) and prints that directory
# on its last stdout line; run the job with
#   java -cp "<dir>/*" dev.weir.bench.FlinkKafkaCount --bootstrap ... 
# Idempotent: skips Maven when the built jars are newer than pom.xml, src/
# and this script. Needs a JDK 17+ and Maven (mvn) on PATH; on an empty ~/.m2
# Maven downloads everything from Maven Central. Maven's own output goes to
# stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${XDG_CACHE_HOME:-$HOME/.cache}/weir/flink-kafka"
lib="$out/lib"
stamp="$out/.built"
mkdir -p "$out"

# One build at a time.
exec 9>"$out/.lock"
if command -v flock >/dev/null 2>&1; then
    flock 9
fi

fresh() {
    [[ -f "$stamp" && -d "$lib" ]] || return 1
    [[ -z "$(find "$here/pom.xml" "$here/src" "$here/build.sh" -newer "$stamp" -print -quit)" ]]
}

if ! fresh; then
    rm -rf "$out/lib.tmp" "$out/lib.old"
    mvn -q -B -Dstyle.color=never -f "$here/pom.xml" \
        -Dbench.build.dir="$out/build" -DskipTests \
        -DincludeScope=runtime -DoutputDirectory="$out/lib.tmp" \
        package dependency:copy-dependencies >&2
    cp "$out/build/flink-kafka-count-"*.jar "$out/lib.tmp/"
    if [[ -d "$lib" ]]; then mv "$lib" "$out/lib.old"; fi
    mv "$out/lib.tmp" "$lib"
    rm -rf "$out/lib.old"
    touch "$stamp"
fi

echo "$lib"
