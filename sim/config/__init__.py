"""The scenario: every section validated and frozen (sites, workload, services, market,
runtime options), their composition and cross-section checks (`Scenario`), loading a TOML
file and `--set` overrides. All input validation lives here; it imports only `sim.models`,
`sim.util` and `sim.errors`.
"""
