"""Pure physics and catalogs: GPUs and their power-cap performance (hardware), MIG slices,
GPU sharing, multi-GPU scaling, Zeus's training measurements and the prices of compute.
They take numbers or one config section, never a whole `Scenario`, and import only
`sim.util` and `sim.errors`.
"""
