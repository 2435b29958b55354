#!/usr/bin/env bash
# Every test: build with AddressSanitizer and UBSan, then run the unit and
# end-to-end tests with ctest.  Installs what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/setup.sh build-test -DAUTOBATCH_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
cd build-test
ctest -j"$(nproc)" --output-on-failure --timeout 600
