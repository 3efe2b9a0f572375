#!/usr/bin/env bash
# Regenerates every screenshot and figure of the README kept in reports/ (see
# reports/README.md): runs the bundled quickstart, timed and cluster demo sweeps into a
# scratch folder, reports them, and takes the top of each report in headless Chromium at
# 1400 and 800 px wide. Usage, from anywhere: reports/screenshots.sh
# (PREFIXSIM and CHROMIUM override the commands; the tune history is made by the commands in
# reports/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIXSIM=${PREFIXSIM:-.venv/bin/prefixsim}
CHROMIUM=${CHROMIUM:-chromium}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

shoot() {  # shoot NAME WIDTH HEIGHT: the top of NAME's report, WIDTH x HEIGHT px
    "$CHROMIUM" --headless --no-sandbox --disable-gpu --hide-scrollbars \
        --user-data-dir="$work/profile" --window-size="$2,$3" \
        --screenshot="reports/$1_report_$2.png" "file://$work/$1/report.html" 2>/dev/null
}

for name in quickstart timed_demo cluster_demo; do
    "$PREFIXSIM" sweep "traces/sweeps/$name.yaml" -o "$work/$name" --quiet
    "$PREFIXSIM" report "$work/$name" --quiet
done
shoot quickstart 1400 1250
shoot quickstart 800 2300
shoot timed_demo 1400 1000
shoot timed_demo 800 1700
shoot cluster_demo 1400 1000
shoot cluster_demo 800 1700
cp "$work/quickstart/plots/policy_zoo.png" reports/quickstart_policy_zoo.png
cp "$work/quickstart/plots/latency_ecdfs.png" reports/quickstart_latency_ecdfs.png
ls -l reports/*.png
