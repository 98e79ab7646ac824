"""dcsim's grid data: the zone catalogs of hourly carbon intensity, marginal emission series
and day-ahead prices, derived by `dcsim grid-data build` and its companions (`SOURCES.md`).

A data package, no code: it is installed with dcsim so that runs find the catalog wherever
dcsim is installed (`sim.grid.data_dir`)."""
