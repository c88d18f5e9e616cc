"""Reports about converted models: op statistics, benchmark tables, offline and online
reports, layer-by-layer validation and the visual (HTML / Graphviz) report."""
