"""The hostile-input suite: a seeded corpus of bad, odd and broken inputs, each run
through tile-opt and tile_mlir.compile() in a forked child (see test_hostile.py)."""
