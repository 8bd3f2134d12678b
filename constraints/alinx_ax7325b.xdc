# wanreduce project constraints for the ALINX AX7325B (XC7K325T-2FFG900).
# Read by Vivado after the XDC that Amaranth generates from amaranth-boards (pin LOCs, IO
# standards, create_clock on the 156.25 MHz SFP reference clock clk_sfp_0). The 10G Ethernet
# Subsystem IP (axi_10g_ethernet) carries its own XDC: it derives coreclk (156.25 MHz), the clock
# of the MAC's AXI4-Stream ports and of wanreduce_core, from that reference clock, so the core
# needs no create_clock of its own here.
# Port names are the Amaranth top-level ports (tests/test_boards.py checks that they exist).

# Configuration bank voltage (bank 0 at 3.3 V on this board) and a compressed bitstream.
set_property CFGBVS VCCO [current_design]
set_property CONFIG_VOLTAGE 3.3 [current_design]
set_property BITSTREAM.GENERAL.COMPRESS TRUE [current_design]

# Slow, asynchronous board I/O: SFP loss-of-signal inputs, transmitter disables, LEDs.
set_false_path -from [get_ports -quiet {sfp*__loss__io}]
set_false_path -to [get_ports -quiet {sfp*__tx_dis__io}]
set_false_path -to [get_ports -quiet {led_*__io}]
