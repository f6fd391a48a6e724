# depth_series: `gnuplot depth_series.gp` in this folder writes depth_series.svg and depth_series.png
set terminal svg size 1100,450 noenhanced font 'sans,12' background rgb 'white'
set output 'depth_series.svg'
reset
set datafile missing 'NaN'
set grid lc rgb '#dddddd'
set key outside right top
set style data lines
set key below horizontal
set logscale x 2
set xrange [1.53846:20.8]
set multiplot layout 1,2 title 'The depth series: mean and 95% t interval over 12 seeds'
set xlabel 'blocks L'
set ylabel 'relative error vs bf16 (pp)'
plot 'depth_series.dat' using ($1*0.950):3:4:5 with yerrorlines title 'e2m1', 'depth_series.dat' using ($1*0.970):6:7:8 with yerrorlines title 'ufp4', 'depth_series.dat' using ($1*0.990):9:10:11 with yerrorlines title 'fp32', 'depth_series.dat' using ($1*1.010):12:13:14 with yerrorlines title 'e2m1-4over6', 'depth_series.dat' using ($1*1.030):15:16:17 with yerrorlines title 'nvfp4-4over6', 'depth_series.dat' using ($1*1.050):18:19:20 with yerrorlines title 'nvfp4'
set ylabel 'D = e2m1 - ufp4 (pp)'
plot 'depth_series.dat' using 1:21:22:23 with yerrorlines title 'D', 0 notitle with lines dt 2
unset multiplot
set terminal pngcairo size 1100,450 noenhanced font 'sans,10' background rgb 'white'
set output 'depth_series.png'
reset
set datafile missing 'NaN'
set grid lc rgb '#dddddd'
set key outside right top
set style data lines
set key below horizontal
set logscale x 2
set xrange [1.53846:20.8]
set multiplot layout 1,2 title 'The depth series: mean and 95% t interval over 12 seeds'
set xlabel 'blocks L'
set ylabel 'relative error vs bf16 (pp)'
plot 'depth_series.dat' using ($1*0.950):3:4:5 with yerrorlines title 'e2m1', 'depth_series.dat' using ($1*0.970):6:7:8 with yerrorlines title 'ufp4', 'depth_series.dat' using ($1*0.990):9:10:11 with yerrorlines title 'fp32', 'depth_series.dat' using ($1*1.010):12:13:14 with yerrorlines title 'e2m1-4over6', 'depth_series.dat' using ($1*1.030):15:16:17 with yerrorlines title 'nvfp4-4over6', 'depth_series.dat' using ($1*1.050):18:19:20 with yerrorlines title 'nvfp4'
set ylabel 'D = e2m1 - ufp4 (pp)'
plot 'depth_series.dat' using 1:21:22:23 with yerrorlines title 'D', 0 notitle with lines dt 2
unset multiplot
set output
