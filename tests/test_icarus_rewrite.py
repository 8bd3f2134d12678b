"""The Icarus 11 rewrite of always_comb (docs/simulation.md); the cocotb benches run the result
on Icarus in `make test-icarus`."""

from wanreduce.sim.simulator import icarus_compatible

SV = """module a(x, y);
  input x; output reg [1:0] y;
  always_comb begin
    y = 2'h0;
    if (x) begin
      y = 2'h2;
    end
  end
endmodule
module b(clk);
  input clk;
  always_comb begin
  end
endmodule
"""


def test_every_always_comb_becomes_a_kicked_always_star():
    out = icarus_compatible(SV)
    assert "always_comb" not in out
    assert out.count("always @* begin if (wanreduce_icarus_kick) begin end") == 2
    # one kick register per module, declared right after its header and toggled at time 0
    assert out.count("reg wanreduce_icarus_kick = 1'b0;") == 2
    assert out.count("initial #0 wanreduce_icarus_kick = 1'b1;") == 2
    assert out.index("module b(clk);") < out.rindex("reg wanreduce_icarus_kick")
    assert "y = 2'h2;" in out  # the block bodies are untouched
