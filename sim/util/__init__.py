"""Plumbing every floor may use: atomic writes, CSV rows, typed columns, the run's random
streams and the append-only time logs. It imports only `sim.errors` of dcsim's.
"""
