"""wanreduce planner: topologies, schedule families, the round model, the optimiser, reports
and the discrete-event simulator that checks the model. Installed as ``wanreduce.planner``;
it never imports the host data path or the gateware, except the size of the driver's agreement
vector (``host/agreement.py``, pure: its one definition), which every round's time includes."""
