"""Capacity for a goal (issue 24): a roofline performance model per GPU, its
calibration from a measured sweep, the plan by latency targets and cost, the
bench report and the engines' live metrics. A core with no UI.

Modules: :mod:`.slo` (targets, prices, sweeps), :mod:`.roofline` (one engine
step and a closed loop's steady state), :mod:`.calibrate` (fit the
efficiencies to ``bench --sweep`` output), :mod:`.capacity` (the plan rows:
max rate per replica within the targets, replicas, cost, the limiting bound),
:mod:`.report` (llm-d benchmark report JSON, plots, index.html),
:mod:`.metrics` (vLLM's metrics from Ray's Prometheus endpoint).
Every figure the model gives is an estimate; docs/capacity.md says how
accurate it was.
"""
