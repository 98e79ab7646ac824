"""Studies over many runs: sweeps of a factor grid (local or Dask), statistics across seeds,
figures and figure sets. It runs simulations only through `sim.engine.build`.
"""
