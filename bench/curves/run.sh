#!/usr/bin/env bash
# bench/curves/run.sh — the scaling curves as PNG pictures (gnuplot), issue 20:
#   converge.png   time to converge N deployments, mlplat and a bare concurrent client
#   pass.png       one steady pass against N: a bare client's
#                  LIST-and-compare resync covers its own N objects; mlplat's pass (per-row
#                  resync) reads only the rows changed or due, so its line is what the
#                  sampled passes found due, not a function of N (bench/steady_pass is that)
#   takeover.png   the distribution (CDF) of the time from losing a leader to the new
#                  leader's first pass: terminated, kill -9 (crash restart), promoted replica
#
#   SIZES="100 300 1000" TRIALS=10 INTENTS=100 bench/curves/run.sh [--plot-only]
#
# Runs bench/converge/run.sh (OUT=...) and bench/runtime/run.sh (RAW=...), keeps their
# tables and raw figures in $DATA (default bench/curves/data, committed so the pictures
# can be redrawn and checked), then draws the PNGs into $IMG (default docs/img).
# --plot-only redraws from $DATA.  The defaults are small on purpose: a shared 2-core
# machine converges 1,000 deployments in under a minute; larger SIZES work the same way.
# gnuplot comes from Debian's gnuplot-nox, installed here when missing (benches only;
# no test needs it).
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
DATA=${DATA:-$SRC/bench/curves/data}
IMG=${IMG:-$SRC/docs/img}
export SIZES=${SIZES:-"100 300 1000"} TRIALS=${TRIALS:-10} INTENTS=${INTENTS:-100}

if ! command -v gnuplot >/dev/null; then
	bash "$SRC/scripts/setup.sh" --bench
fi

if [ "${1:-}" != "--plot-only" ]; then
	mkdir -p "$DATA"
	rm -f "$DATA"/converge.tsv "$DATA"/takeover_*.txt
	OUT=$DATA/converge.tsv bash "$SRC/bench/converge/run.sh" | tee "$DATA/converge.txt"
	RAW=$DATA bash "$SRC/bench/runtime/run.sh" | tee "$DATA/runtime.txt"
	echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores" >"$DATA/machine.txt"
fi

mkdir -p "$IMG"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
# a CDF per takeover kind: value, fraction of trials at most that value
for k in terminate kill9 promote; do
	f=$DATA/takeover_$k.txt
	if [ -s "$f" ]; then
		sort -n "$f" | awk '{a[NR]=$1} END {for (i = 1; i <= NR; i++) print a[i], i / NR}' >"$T/$k.cdf"
	else
		echo "0 0" >"$T/$k.cdf"
	fi
done
gnuplot <<GP
set terminal pngcairo size 720,440 font "sans,10"
set datafile separator whitespace
set key top left
set grid

set output "$IMG/converge.png"
set title "Converge N deployments against the stand-in (bench/converge)"
set xlabel "deployments N"
set ylabel "seconds"
set logscale xy
plot "$DATA/converge.tsv" using 1:(\$2/1000) with linespoints lw 2 pt 7 title "mlplat (deploy() -> all READY)", \
     "$DATA/converge.tsv" using 1:(\$3/1000) with linespoints lw 2 pt 5 title "bare concurrent client (same applies)"

set output "$IMG/pass.png"
set title "One steady pass (bench/converge: 5 passes sampled after a converge)"
set key bottom right
set xlabel "N: live deployments (mlplat), objects LISTed (bare client)"
set ylabel "milliseconds per pass"
plot "$DATA/converge.tsv" using 6:4 with linespoints lw 2 pt 7 title "mlplat pass (reads only rows changed or due)", \
     "$DATA/converge.tsv" using 1:5 with linespoints lw 2 pt 5 title "bare client: LIST all + compare"

unset logscale
set output "$IMG/takeover.png"
set title "Takeover: leader lost -> new leader's first pass (bench/runtime)"
set xlabel "milliseconds"
set ylabel "fraction of trials"
set logscale x
set yrange [0:1.05]
set key top left
plot "$T/terminate.cdf" using 1:2 with steps lw 2 title "leader terminated", \
     "$T/kill9.cdf" using 1:2 with steps lw 2 title "kill -9 (crash restart)", \
     "$T/promote.cdf" using 1:2 with steps lw 2 title "replica promoted"
GP
ls -l "$IMG"/converge.png "$IMG"/pass.png "$IMG"/takeover.png
