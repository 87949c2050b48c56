# throughput.gp: make bench's chart of messages per second against body
# size, from bench_goals' throughput.dat. gnuplot -e "dat='...'; png='...'"
set terminal pngcairo size 900,560 noenhanced
set output png
set title "Messages per second against body size (one run of make bench)"
set xlabel "body size, bytes"
set ylabel "messages per second"
set logscale xy
set xrange [80:20000]
set xtics ("100 B" 100, "1 KiB" 1024, "4 KiB" 4096, "16 KiB" 16384)
set key left bottom box opaque
set grid
plot dat using 1:5 with linespoints title "ceiling: encode + CRC into a warm mapping", \
     dat using 1:4 with linespoints title "engine append (C API, async)", \
     dat using 1:2 with linespoints title "store through SQL: durable + found by key", \
     dat using 1:3 with linespoints title "plain SQLite (WAL, FULL): durable + found"
