"""wanreduce planner: topologies, schedule families, the round model, the optimiser, reports
and the discrete-event simulator that checks the model. Installed as ``wanreduce.planner``;
it never imports the host data path or the gateware."""
