"""The stages, one package each (sources, artifacts, links, python, build, validate), and the registry that orders
them."""
