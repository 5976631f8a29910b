// Behavioural simulation model of the Lattice ECP5 clock-network buffer DCCA (ports as
// Yosys's techlibs/ecp5/cells_bb.v declares them). The project drives fabric signals
// onto global networks through it with CE tied high (rtl/fpga.py global_net), where it
// is a buffer; with CE low the output is held low (the enable's glitch-free timing is
// not modelled). Verilog-2005.
module DCCA(input CLKI, input CE, output CLKO);
    assign CLKO = CE ? CLKI : 1'b0;
endmodule
