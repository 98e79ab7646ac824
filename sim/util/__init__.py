"""Plumbing every floor may use: atomic writes, CSV rows, typed columns, the run's random
streams, the append-only time logs and the time-weighted percentile. It imports only
`sim.errors` of dcsim's.
"""
