"""Pure physics and catalogs: GPUs and their power-cap performance (hardware), MIG slices,
GPU sharing, multi-GPU scaling, gang placement on a pool's servers (placement), Zeus's
training measurements, the prices of compute, the LLM serving model (llm: the catalog's
model specs; llm_roofline, llm_performance, llm_replica: what a replica delivers;
llm_quality: answer quality) and the topohub names of WAN topologies (topologies).
They take numbers or one config section, never a whole `Scenario`, and import only
`sim.util` and `sim.errors`.
"""
