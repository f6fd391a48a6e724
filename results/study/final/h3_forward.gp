# h3_forward: `gnuplot h3_forward.gp` in this folder writes h3_forward.svg and h3_forward.png
set terminal svg size 1100,450 noenhanced font 'sans,12' background rgb 'white'
set output 'h3_forward.svg'
reset
set datafile missing 'NaN'
set grid lc rgb '#dddddd'
set key outside right top
set style data lines
set key below horizontal
set xrange [-0.5:16.5]
set multiplot layout 1,2 title 'residual stream after block l at fixed weights (bf16 checkpoints, L = 16): mean and 95% t interval over 20 seeds'
set xlabel 'block l (0 = embeddings)'
set ylabel 'forward ratio'
plot 'h3_curves.dat' using ($1-0.06):2:3:4 with yerrorlines title 'e2m1', 'h3_curves.dat' using ($1+0.06):5:6:7 with yerrorlines title 'ufp4'
set ylabel 'forward cosine'
plot 'h3_curves.dat' using ($1-0.06):8:9:10 with yerrorlines title 'e2m1', 'h3_curves.dat' using ($1+0.06):11:12:13 with yerrorlines title 'ufp4'
unset multiplot
set terminal pngcairo size 1100,450 noenhanced font 'sans,10' background rgb 'white'
set output 'h3_forward.png'
reset
set datafile missing 'NaN'
set grid lc rgb '#dddddd'
set key outside right top
set style data lines
set key below horizontal
set xrange [-0.5:16.5]
set multiplot layout 1,2 title 'residual stream after block l at fixed weights (bf16 checkpoints, L = 16): mean and 95% t interval over 20 seeds'
set xlabel 'block l (0 = embeddings)'
set ylabel 'forward ratio'
plot 'h3_curves.dat' using ($1-0.06):2:3:4 with yerrorlines title 'e2m1', 'h3_curves.dat' using ($1+0.06):5:6:7 with yerrorlines title 'ufp4'
set ylabel 'forward cosine'
plot 'h3_curves.dat' using ($1-0.06):8:9:10 with yerrorlines title 'e2m1', 'h3_curves.dat' using ($1+0.06):11:12:13 with yerrorlines title 'ufp4'
unset multiplot
set output
