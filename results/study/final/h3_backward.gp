# h3_backward: `gnuplot h3_backward.gp` in this folder writes h3_backward.svg and h3_backward.png
set terminal svg size 1100,450 noenhanced font 'sans,12' background rgb 'white'
set output 'h3_backward.svg'
reset
set datafile missing 'NaN'
set grid lc rgb '#dddddd'
set key outside right top
set style data lines
set key below horizontal
set xrange [-0.5:16.5]
set multiplot layout 1,2 title 'dX at the input of block l at fixed weights (bf16 checkpoints, L = 16): mean and 95% t interval over 20 seeds'
set xlabel 'block l (L = from the head)'
set ylabel 'dX ratio'
plot 'h3_curves.dat' using ($1-0.06):14:15:16 with yerrorlines title 'e2m1', 'h3_curves.dat' using ($1+0.06):17:18:19 with yerrorlines title 'ufp4'
set ylabel 'dX cosine'
plot 'h3_curves.dat' using ($1-0.06):20:21:22 with yerrorlines title 'e2m1', 'h3_curves.dat' using ($1+0.06):23:24:25 with yerrorlines title 'ufp4'
unset multiplot
set terminal pngcairo size 1100,450 noenhanced font 'sans,10' background rgb 'white'
set output 'h3_backward.png'
reset
set datafile missing 'NaN'
set grid lc rgb '#dddddd'
set key outside right top
set style data lines
set key below horizontal
set xrange [-0.5:16.5]
set multiplot layout 1,2 title 'dX at the input of block l at fixed weights (bf16 checkpoints, L = 16): mean and 95% t interval over 20 seeds'
set xlabel 'block l (L = from the head)'
set ylabel 'dX ratio'
plot 'h3_curves.dat' using ($1-0.06):14:15:16 with yerrorlines title 'e2m1', 'h3_curves.dat' using ($1+0.06):17:18:19 with yerrorlines title 'ufp4'
set ylabel 'dX cosine'
plot 'h3_curves.dat' using ($1-0.06):20:21:22 with yerrorlines title 'e2m1', 'h3_curves.dat' using ($1+0.06):23:24:25 with yerrorlines title 'ufp4'
unset multiplot
set output
