// Behavioural simulation model of the Lattice ECP5 sysDSP multiplier MULT18X18D
// (ports and parameters as Yosys's techlibs/ecp5/cells_bb.v declares them).
//
// Written for simulating designs that instantiate the block with its own registers,
// such as pe/fp_mul.py with dsp="ecp5" (Yosys ships no simulation model of it). It
// covers the subset such designs use, and stops the simulation at time 0 on anything
// else:
//   * the A / B input registers, the pipeline register and the output register, each
//     NONE or on CLK0 with CE0 and RST0; the C input register NONE;
//   * RESETMODE "SYNC": a register is cleared at a clock edge with its RST high,
//     whatever its CE (a synchronous reset wins over the clock enable, as in the ECP5
//     fabric's FD1P3IX and in Amaranth, where a domain's reset overrides an
//     EnableInserter's enable); otherwise it loads at an edge with its CE high;
//   * P = A * B over 36 bits, each operand signed when its SIGNEDA / SIGNEDB is high
//     (these must be constant: the model applies them at the multiply, unregistered);
//   * SOURCEA = SOURCEB = 0 (operands from the A / B pins; the shift chains SRIA / SRIB
//     are not modelled, SROA / SROB read 0), MULT_BYPASS "DISABLED".
// ROA / ROB are the operands after the input registers, ROC the C input, SIGNEDP the
// product's sign mode (SIGNEDA | SIGNEDB). Verilog-2005.
module MULT18X18D(
    input A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0,
    input B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0,
    input C17, C16, C15, C14, C13, C12, C11, C10, C9, C8, C7, C6, C5, C4, C3, C2, C1, C0,
    input SIGNEDA, SIGNEDB, SOURCEA, SOURCEB,
    input CLK3, CLK2, CLK1, CLK0,
    input CE3, CE2, CE1, CE0,
    input RST3, RST2, RST1, RST0,
    input SRIA17, SRIA16, SRIA15, SRIA14, SRIA13, SRIA12, SRIA11, SRIA10, SRIA9, SRIA8, SRIA7, SRIA6, SRIA5, SRIA4, SRIA3, SRIA2, SRIA1, SRIA0,
    input SRIB17, SRIB16, SRIB15, SRIB14, SRIB13, SRIB12, SRIB11, SRIB10, SRIB9, SRIB8, SRIB7, SRIB6, SRIB5, SRIB4, SRIB3, SRIB2, SRIB1, SRIB0,
    output SROA17, SROA16, SROA15, SROA14, SROA13, SROA12, SROA11, SROA10, SROA9, SROA8, SROA7, SROA6, SROA5, SROA4, SROA3, SROA2, SROA1, SROA0,
    output SROB17, SROB16, SROB15, SROB14, SROB13, SROB12, SROB11, SROB10, SROB9, SROB8, SROB7, SROB6, SROB5, SROB4, SROB3, SROB2, SROB1, SROB0,
    output ROA17, ROA16, ROA15, ROA14, ROA13, ROA12, ROA11, ROA10, ROA9, ROA8, ROA7, ROA6, ROA5, ROA4, ROA3, ROA2, ROA1, ROA0,
    output ROB17, ROB16, ROB15, ROB14, ROB13, ROB12, ROB11, ROB10, ROB9, ROB8, ROB7, ROB6, ROB5, ROB4, ROB3, ROB2, ROB1, ROB0,
    output ROC17, ROC16, ROC15, ROC14, ROC13, ROC12, ROC11, ROC10, ROC9, ROC8, ROC7, ROC6, ROC5, ROC4, ROC3, ROC2, ROC1, ROC0,
    output P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20, P19, P18, P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1, P0,
    output SIGNEDP
);
    parameter REG_INPUTA_CLK = "NONE";
    parameter REG_INPUTA_CE = "CE0";
    parameter REG_INPUTA_RST = "RST0";
    parameter REG_INPUTB_CLK = "NONE";
    parameter REG_INPUTB_CE = "CE0";
    parameter REG_INPUTB_RST = "RST0";
    parameter REG_INPUTC_CLK = "NONE";
    parameter REG_INPUTC_CE = "CE0";
    parameter REG_INPUTC_RST = "RST0";
    parameter REG_PIPELINE_CLK = "NONE";
    parameter REG_PIPELINE_CE = "CE0";
    parameter REG_PIPELINE_RST = "RST0";
    parameter REG_OUTPUT_CLK = "NONE";
    parameter REG_OUTPUT_CE = "CE0";
    parameter REG_OUTPUT_RST = "RST0";
    parameter CLK0_DIV = "ENABLED";
    parameter CLK1_DIV = "ENABLED";
    parameter CLK2_DIV = "ENABLED";
    parameter CLK3_DIV = "ENABLED";
    parameter HIGHSPEED_CLK = "NONE";
    parameter GSR = "ENABLED";
    parameter CAS_MATCH_REG = "FALSE";
    parameter SOURCEB_MODE = "B_SHIFT";
    parameter MULT_BYPASS = "DISABLED";
    parameter RESETMODE = "SYNC";

    localparam IN_A = REG_INPUTA_CLK == "CLK0";
    localparam IN_B = REG_INPUTB_CLK == "CLK0";
    localparam PIPE = REG_PIPELINE_CLK == "CLK0";
    localparam OUTR = REG_OUTPUT_CLK == "CLK0";

    wire [17:0] a = {A17, A16, A15, A14, A13, A12, A11, A10, A9, A8, A7, A6, A5, A4, A3, A2, A1, A0};
    wire [17:0] b = {B17, B16, B15, B14, B13, B12, B11, B10, B9, B8, B7, B6, B5, B4, B3, B2, B1, B0};
    wire [17:0] c = {C17, C16, C15, C14, C13, C12, C11, C10, C9, C8, C7, C6, C5, C4, C3, C2, C1, C0};

    // a register is CLK0 / CE0 / RST0 or absent; anything else is outside the model
    function ok_reg;
        input [8*8-1:0] clk, ce, rst;
        ok_reg = clk == "NONE" || (clk == "CLK0" && ce == "CE0" && rst == "RST0");
    endfunction
    initial begin
        if (!ok_reg(REG_INPUTA_CLK, REG_INPUTA_CE, REG_INPUTA_RST) ||
            !ok_reg(REG_INPUTB_CLK, REG_INPUTB_CE, REG_INPUTB_RST) ||
            !ok_reg(REG_PIPELINE_CLK, REG_PIPELINE_CE, REG_PIPELINE_RST) ||
            !ok_reg(REG_OUTPUT_CLK, REG_OUTPUT_CE, REG_OUTPUT_RST) ||
            REG_INPUTC_CLK != "NONE" || RESETMODE != "SYNC" || MULT_BYPASS != "DISABLED") begin
            $display("MULT18X18D model (%m): register settings outside the model (CLK0/CE0/RST0 or NONE; C unregistered; RESETMODE SYNC; MULT_BYPASS DISABLED)");
            $finish;
        end
    end

    reg [17:0] a_r = 18'd0, b_r = 18'd0;
    reg [35:0] pipe_r = 36'd0, out_r = 36'd0;
    always @(posedge CLK0) begin
        if (RST0) begin
            a_r <= 18'd0;
            b_r <= 18'd0;
        end else if (CE0) begin
            a_r <= a;
            b_r <= b;
        end
    end
    wire [17:0] ma = IN_A ? a_r : a;
    wire [17:0] mb = IN_B ? b_r : b;
    wire [35:0] ea = {{18{SIGNEDA & ma[17]}}, ma};
    wire [35:0] eb = {{18{SIGNEDB & mb[17]}}, mb};
    wire [35:0] prod = ea * eb;
    always @(posedge CLK0) begin
        if (RST0) pipe_r <= 36'd0;
        else if (CE0) pipe_r <= prod;
    end
    wire [35:0] mid = PIPE ? pipe_r : prod;
    always @(posedge CLK0) begin
        if (RST0) out_r <= 36'd0;
        else if (CE0) out_r <= mid;
    end
    wire [35:0] p = OUTR ? out_r : mid;

    // SOURCEA / SOURCEB high would select the shift chains: outside the model
    always @(SOURCEA or SOURCEB)
        if (SOURCEA === 1'b1 || SOURCEB === 1'b1) begin
            $display("MULT18X18D model (%m): SOURCEA / SOURCEB (shift chains) are not modelled");
            $finish;
        end

    assign {P35, P34, P33, P32, P31, P30, P29, P28, P27, P26, P25, P24, P23, P22, P21, P20, P19, P18, P17, P16, P15, P14, P13, P12, P11, P10, P9, P8, P7, P6, P5, P4, P3, P2, P1, P0} = p;
    assign {ROA17, ROA16, ROA15, ROA14, ROA13, ROA12, ROA11, ROA10, ROA9, ROA8, ROA7, ROA6, ROA5, ROA4, ROA3, ROA2, ROA1, ROA0} = ma;
    assign {ROB17, ROB16, ROB15, ROB14, ROB13, ROB12, ROB11, ROB10, ROB9, ROB8, ROB7, ROB6, ROB5, ROB4, ROB3, ROB2, ROB1, ROB0} = mb;
    assign {ROC17, ROC16, ROC15, ROC14, ROC13, ROC12, ROC11, ROC10, ROC9, ROC8, ROC7, ROC6, ROC5, ROC4, ROC3, ROC2, ROC1, ROC0} = c;
    assign {SROA17, SROA16, SROA15, SROA14, SROA13, SROA12, SROA11, SROA10, SROA9, SROA8, SROA7, SROA6, SROA5, SROA4, SROA3, SROA2, SROA1, SROA0} = 18'd0;
    assign {SROB17, SROB16, SROB15, SROB14, SROB13, SROB12, SROB11, SROB10, SROB9, SROB8, SROB7, SROB6, SROB5, SROB4, SROB3, SROB2, SROB1, SROB0} = 18'd0;
    assign SIGNEDP = SIGNEDA | SIGNEDB;
endmodule
