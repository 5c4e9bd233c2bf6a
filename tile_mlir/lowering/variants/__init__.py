"""The lowering variants, one folder per tile op and one module per variant."""
