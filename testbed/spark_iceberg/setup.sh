#!/usr/bin/env bash
# Builds the Spark 3.5 + Iceberg environment that writes the tests' and benchmarks' Iceberg tables
# with delete files (pyiceberg cannot write them), from PyPI wheels alone (no Maven):
#
#   DIR/venv                  pyspark 3.5 and Iceberg's Spark runtime jar (requirements.txt)
#   DIR/iceberg-jackson.jar   Jackson relocated where that jar looks for it (relocate_jackson.py)
#   DIR/iceberg-httpclient5.jar   HttpClient 5 relocated likewise, from Debian's jars, for Iceberg's
#                             REST catalog client (relocate_httpclient5.py; `make spark-iceberg`
#                             installs libhttpclient5-java and libhttpcore5-java)
#
# Usage: setup.sh DIR        (`make spark-iceberg` runs it with DIR = .cache/spark-iceberg)
# Idempotent: a second run installs nothing new, and rebuilds the Jackson jar only when
# relocate_jackson.py changed. Prints the environment's python. Scripts run by it import
# testbed/spark_iceberg/session.py from the repository (see __init__.py there).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# Jackson 2.18's core, databind and annotations jars; downloaded, never installed.
jackson_wheel="snowpark-connect-deps-2==3.56.7"

# The venv, with exactly the pinned packages. pip install is a no-op when they are there.
make_venv() {
    local dir=$1
    [ -x "$dir/venv/bin/python" ] || python3 -m venv "$dir/venv"
    "$dir/venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
}

# The shaded Jackson jar, unless one newer than the script that makes it is there already.
# A subshell, so that the downloaded wheel goes whatever happens.
make_jackson_jar() (
    dir=$1
    jar=$dir/iceberg-jackson.jar
    if [ -s "$jar" ] && [ "$jar" -nt "$here/relocate_jackson.py" ]; then
        exit 0
    fi
    download=$(mktemp -d)
    trap 'rm -rf "$download"' EXIT
    "$dir/venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
        --dest "$download" "$jackson_wheel"
    "$dir/venv/bin/python" "$here/relocate_jackson.py" "$download"/snowpark_connect_deps_2-*.whl "$jar"
)

# The relocated HttpClient 5 jar, unless one newer than its script is there already.
make_httpclient5_jar() {
    local dir=$1 jar=$1/iceberg-httpclient5.jar
    if [ -s "$jar" ] && [ "$jar" -nt "$here/relocate_httpclient5.py" ]; then
        return 0
    fi
    "$dir/venv/bin/python" "$here/relocate_httpclient5.py" "$jar"
}

main() {
    local dir=${1:?usage: setup.sh DIR}
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    make_venv "$dir"
    make_jackson_jar "$dir"
    make_httpclient5_jar "$dir"
    echo "$dir/venv/bin/python"
}

main "$@"
